"""Routing: find the matching routes, choose one, locate the service (RTE-03).

``match``, ``choose`` and ``locate`` are the three steps of the documents,
as functions of a route table and an instance, so each reads beside its rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sbtck.contract import LOCAL, TRANSPORT
from sbtck.engine.choosing import (
    AS_ANY_MIRRORED_MEMBER,
    AS_ITS_FIRST_MEMBER,
    BROKER_INSTANCE,
    DATABASE_ORDER,
    MIXED_GROUP,
    ROUTE,
    Addresses,
    Chooser,
)
from sbtck.engine.model import Database, Instance, Route


@dataclass(init=False)
class Match:
    step: str
    routes: list[Route] = field(default_factory=list)
    delayed: bool = False
    request: Route | None = None
    picked_broker_instance: str | None = None

    def __init__(
        self,
        step: str,
        routes: list[Route] | None = None,
        delayed: bool = False,
        request: Route | None = None,
        picked_broker_instance: str | None = None,
    ) -> None:
        self.step, self.routes, self.delayed = step, [] if routes is None else routes, delayed
        self.request, self.picked_broker_instance = request, picked_broker_instance


def live(routes: Iterable[Route], now_ms: int) -> list[Route]:
    """RTE-02: expired routes take no part."""
    return sorted((r for r in routes if r.expires_ms is None or r.expires_ms > now_ms), key=_name)


def _same_broker(route: Route, broker: str) -> bool:
    return route.broker_instance is not None and route.broker_instance.upper() == broker.upper()


# RTR-1: matching gives mirror addresses no special attention; only choosing does (RTC-1).
def match(
    routes: list[Route],
    service: str,
    broker: str | None,
    pending: set[tuple[str, str]],
    instance_has_service: bool,
    chooser: Chooser,
) -> Match:
    """RTM-0..7: the first step at which one or more routes match decides."""
    if broker:
        found = [r for r in routes if r.service_name == service and _same_broker(r, broker)]
        if found:
            return Match("RTM-1", found)
    found = [r for r in routes if r.broker_instance is None and r.service_name == service]
    if found:
        return Match("RTM-2", found)
    if not broker:
        found = [r for r in routes if r.service_name == service and r.broker_instance is not None]
        if found:
            brokers = sorted({str(r.broker_instance).upper() for r in found})
            pick = brokers[0] if len(brokers) == 1 else chooser.choose(BROKER_INSTANCE, brokers, _addresses(found))
            return Match("RTM-3", [r for r in found if _same_broker(r, pick)], picked_broker_instance=pick)
    dynamic = [r for r in routes if r.dynamic and (r.name, service) not in pending]
    if dynamic:
        return Match("RTM-4", delayed=True, request=dynamic[0])
    found = [r for r in routes if r.service_name is None and r.broker_instance is None]
    if found:
        return Match("RTM-5", found)
    if broker and instance_has_service:
        return Match("RTM-6", [Route("(as if LOCAL)", service_name=service, address=LOCAL)])
    return Match("RTM-7", delayed=True)


def _addresses(routes: list[Route], *, by_name: bool = False) -> Addresses:
    """Where each route (or each broker instance's routes) would send a message: LOCAL, or network addresses."""
    out: dict[str, tuple[str, ...]] = {}
    for r in routes:
        key = r.name if by_name else str(r.broker_instance).upper()
        out[key] = (*out.get(key, ()), r.address.upper(), *([r.mirror_address.upper()] if r.mirror_address else []))
    return out


def is_network(address: str) -> bool:
    return address.upper() not in (LOCAL, TRANSPORT)


@dataclass(init=False)
class Choice:
    step: str
    route: Route
    candidates: list[str]

    def __init__(self, step: str, route: Route, candidates: list[str]) -> None:
        self.step, self.route, self.candidates = step, route, candidates


def choose(routes: list[Route], instance_has_service: bool, chooser: Chooser) -> Choice | None:
    """RTC-0..4: identical routes count once; mirror, then LOCAL, then network address, then TRANSPORT."""
    distinct: dict[tuple[str | None, str | None, str], Route] = {}
    # which name a group of identical routes goes by is not said either: the chooser may pick any member
    members: dict[tuple[str | None, str | None, str], list[Route]] = {}
    for route in sorted(routes, key=_name):
        distinct.setdefault(route.identity(), route)
        members.setdefault(route.identity(), []).append(route)
    # most groups have one member: only a larger one can differ in mirror address
    mixed = [k for k, g in members.items() if len(g) > 1 and len({bool(m.mirror_address) for m in g}) > 1]
    if mixed and chooser.choose(MIXED_GROUP, [AS_ITS_FIRST_MEMBER, AS_ANY_MIRRORED_MEMBER]) == AS_ANY_MIRRORED_MEMBER:
        for k in mixed:  # the group specifies a mirror address, and only a member that does names it
            members[k] = [m for m in members[k] if m.mirror_address]
            distinct[k] = members[k][0]
    # one pass sorts the candidates into the four steps: this runs on every routing attempt, retries included
    mirrored: list[Route] = []
    local: list[Route] = []
    network: list[Route] = []
    transport: list[Route] = []
    for r in distinct.values():
        address = r.address.upper()
        if r.mirror_address:
            mirrored.append(r)
        if address == LOCAL:
            local.append(r)
        elif address == TRANSPORT:
            transport.append(r)
        elif not r.mirror_address:
            network.append(r)
    steps = (
        ("RTC-1", mirrored),
        ("RTC-2", local if instance_has_service else []),
        ("RTC-3", network),
        ("RTC-4", transport),
    )
    for step, options in steps:
        if options:
            names = [r.name for r in options]
            named = [m for r in options for m in members[r.identity()]]
            if len(named) == 1:
                return Choice(step, named[0], names)
            name = chooser.choose(ROUTE, [m.name for m in named], _addresses(named, by_name=True))
            return Choice(step, next(m for m in named if m.name == name), names)
    return None


def _name(route: Route) -> str:
    return route.name


def locate(instance: Instance, service: str, broker: str | None, home: str | None, chooser: Chooser) -> Database | None:
    """RTL-2 and RTL-3: by broker instance when there is one; else the conversation's database first."""
    if broker:
        db = instance.by_broker_instance(broker)
        return db if db is not None and db.online and service in db.services else None
    others = [name for name in instance.databases if name != home]
    order = ([home] if home in instance.databases else []) + (
        chooser.order(DATABASE_ORDER, others) if len(others) > 1 else others
    )
    for name in order:
        db = instance.databases[name]
        if db.online and service in db.services:
            return db
    return None
