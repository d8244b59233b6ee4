"""The reference engine with other values for what the documents leave open, declared as it runs them.

``SBTCK_TUNED="activation_empty_window_s=2,delayed_retry_s=30"`` sets them;
``--iut python:tests.fakes.tuned:tuned`` runs it. A scenario that holds for
any allowed value passes on it whatever the values in range;
``tuned_connecting_when_notified`` takes the other side of PER-2A's open
choice as well, so that no scenario holds for one pairing only.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from sbtck import contract
from sbtck.engine import Broker, EngineParams
from sbtck.iut.reference import ReferenceImplementation
from tests.variants.allowed import connects_on_the_next_notification


class Tuned(ReferenceImplementation):
    def __init__(self, values: dict[str, Any], broker_class: type[Broker] = Broker) -> None:
        params = dataclasses.replace(EngineParams.reference(), **values)
        super().__init__(params=params, broker_class=broker_class, name="reference, tuned")
        self.values = values

    def handshake(self) -> contract.Handshake:
        base = super().handshake()
        return dataclasses.replace(base, params={**base.params, **self.values})


def _values() -> dict[str, Any]:
    """Whole numbers stay integers (forward_hop_limit counts hops); a time may be a half second."""
    pairs = [p.split("=") for p in os.environ.get("SBTCK_TUNED", "").split(",") if p]
    return {name.strip(): int(value) if float(value).is_integer() else float(value) for name, value in pairs}


def tuned() -> Tuned:
    return Tuned(_values())


def tuned_connecting_when_notified() -> Tuned:
    return Tuned(_values(), connects_on_the_next_notification().broker_class)
