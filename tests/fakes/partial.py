"""Partial implementations, as most real ones start: the reference engine, saying and showing only some areas.

Each declares a subset of the capabilities in its handshake and reports only
the events of the kinds that subset covers (``sbtck.observations.AREA``), as
an implementation of that area alone would. Serve one over the protocol with
``sbtck serve --stdio --iut python:tests.fakes.partial:activation_only``.
``variant(AREA, NAME)`` is the fake of one area on a wrong broker of
``tests.variants.AREA``. ``black_box()`` declares every capability but
``decision_trace`` and reports no reasoning at all, as a real broker would:
no decision-trace kinds and no ``rule`` or ``step`` fields.
"""

from __future__ import annotations

from typing import Any

from sbtck import contract
from sbtck.engine import Broker
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import DECISION_FIELDS, TRACE, reported_by
from tests.variants import activation, periodic, routing

VARIANT_MODULES = {"activation": activation, "routing": routing, "periodic": periodic}

ACTIVATION = ("activation", "external_activation")
ROUTING = ("routing", "mirroring", "dynamic_routing", "forwarding")
PERIODIC = ("periodic_tasks",)


class Partial(ReferenceImplementation):
    def __init__(
        self,
        capabilities: tuple[str, ...],
        name: str,
        broker_class: type[Broker] = Broker,
        declared: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(broker_class=broker_class, name=name)
        self.capabilities = capabilities
        self.declared = declared or {}  # parameters its broker runs with, beside the reference's (resend_after_s)

    def handshake(self) -> contract.Handshake:
        full = super().handshake()
        params = {**full.params, **self.declared}
        return contract.Handshake(full.name, full.version, capabilities=self.capabilities, params=params)

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        shown = frozenset(self.capabilities)
        traced = TRACE in shown
        response.events = [
            contract.Event(e.at_ms, e.kind, {k: v for k, v in e.fields.items() if traced or k not in DECISION_FIELDS})
            for e in response.events
            if reported_by(e.kind, shown)
        ]
        return response


def activation_only() -> Partial:
    return Partial(ACTIVATION, "activation only")


def routing_only() -> Partial:
    return Partial(ROUTING, "routing only")


def periodic_only() -> Partial:
    return Partial(PERIODIC, "periodic tasks only")


BLACK_BOX = tuple(capability for capability in contract.CAPABILITIES if capability != TRACE)


def black_box(
    broker_class: type[Broker] = Broker, name: str = "black box", declared: dict[str, Any] | None = None
) -> Partial:
    return Partial(BLACK_BOX, name, broker_class, declared)


AREAS = {"activation": ACTIVATION, "routing": ROUTING, "periodic": PERIODIC}


def variant(area: str, name: str) -> Partial:
    """The fake of one area, getting one of its rules wrong as ``tests.variants.AREA.NAME`` does."""
    wrong: ReferenceImplementation = getattr(VARIANT_MODULES[area], name)()
    return Partial(AREAS[area], f"{area} only, {name}", wrong.broker_class)


def black_box_variant(area: str, name: str) -> Partial:
    """A black box getting one rule wrong as ``tests.variants.AREA.NAME`` does."""
    wrong: ReferenceImplementation = getattr(VARIANT_MODULES[area], name)()
    return black_box(wrong.broker_class, f"black box, {name}")
