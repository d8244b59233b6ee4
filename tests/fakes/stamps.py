"""The reference engine, adding to every SEND's answer an arrival stamped outside the time the answer covers."""

from __future__ import annotations

import dataclasses
import os

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind


class _Stamping(ReferenceImplementation):
    def __init__(self, shift_ms: int) -> None:
        super().__init__(name="stamps events outside their answer's time")
        self.shift_ms = shift_ms

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        if not isinstance(command, contract.Send):
            return response
        arrival = next((e for e in response.events if e.kind == Kind.MESSAGE_ARRIVED), None)
        if arrival is None:
            return response
        forged = dataclasses.replace(arrival, at_ms=command.at_ms + self.shift_ms)
        return dataclasses.replace(response, events=[*response.events, forged])


def stamped() -> ReferenceImplementation:
    """SBTCK_FAKE_SHIFT_MS: how far from the SEND the forged arrival is stamped."""
    return _Stamping(int(os.environ["SBTCK_FAKE_SHIFT_MS"]))
