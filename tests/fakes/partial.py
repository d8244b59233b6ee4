"""Partial implementations, as most real ones start: the reference engine, saying and showing only some areas.

Each declares a subset of the capabilities in its handshake and reports only
the events of the kinds that subset covers (``sbtck.observations.AREA``), as
an implementation of that area alone would. Serve one over the protocol with
``sbtck serve --stdio --iut python:tests.fakes.partial:activation_only``.
``variant(AREA, NAME)`` is the fake of one area on a wrong broker of
``tests.variants.AREA``.
"""

from __future__ import annotations

from sbtck import contract as c
from sbtck.engine import Broker
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import reported_by
from tests.variants import activation, periodic, routing

VARIANT_MODULES = {"activation": activation, "routing": routing, "periodic": periodic}

ACTIVATION = ("activation", "external_activation")
ROUTING = ("routing", "mirroring", "dynamic_routing", "forwarding")
PERIODIC = ("periodic_tasks",)


class Partial(ReferenceImplementation):
    def __init__(self, capabilities: tuple[str, ...], name: str, broker_class: type[Broker] = Broker) -> None:
        super().__init__(broker_class=broker_class, name=name)
        self.capabilities = capabilities

    def handshake(self) -> c.Handshake:
        full = super().handshake()
        return c.Handshake(full.name, full.version, capabilities=self.capabilities, params=full.params)

    def execute(self, command: c.Command) -> c.Response:
        response = super().execute(command)
        shown = frozenset(self.capabilities)
        response.events = [e for e in response.events if reported_by(e.kind, shown)]
        return response


def activation_only() -> Partial:
    return Partial(ACTIVATION, "activation only")


def routing_only() -> Partial:
    return Partial(ROUTING, "routing only")


def periodic_only() -> Partial:
    return Partial(PERIODIC, "periodic tasks only")


AREAS = {"activation": ACTIVATION, "routing": ROUTING, "periodic": PERIODIC}


def variant(area: str, name: str) -> Partial:
    """The fake of one area, getting one of its rules wrong as ``tests.variants.AREA.NAME`` does."""
    wrong: ReferenceImplementation = getattr(VARIANT_MODULES[area], name)()
    return Partial(AREAS[area], f"{area} only, {name}", wrong.broker_class)
