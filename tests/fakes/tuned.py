"""The reference engine with other values for what the documents leave open, declared as it runs them.

``SBTCK_TUNED="activation_empty_window_s=2,delayed_retry_s=30"`` sets them;
``--iut python:tests.fakes.tuned:tuned`` runs it. A scenario that holds for
any allowed value passes on it whatever the values in range.
"""

from __future__ import annotations

import dataclasses
import os

from sbtck import contract as c
from sbtck.engine import EngineParams
from sbtck.iut.reference import ReferenceImplementation


class Tuned(ReferenceImplementation):
    def __init__(self, values: dict[str, int]) -> None:
        super().__init__(params=dataclasses.replace(EngineParams.reference(), **values), name="reference, tuned")
        self.values = values

    def handshake(self) -> c.Handshake:
        base = super().handshake()
        return dataclasses.replace(base, params={**base.params, **self.values})


def tuned() -> Tuned:
    pairs = [p.split("=") for p in os.environ.get("SBTCK_TUNED", "").split(",") if p]
    return Tuned({name.strip(): int(value) for name, value in pairs})
