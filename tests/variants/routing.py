"""Deliberately wrong routers: each gets one routing rule wrong (see test_wrong_variants.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, cast

from sbtck import topology as declared
from sbtck.contract import LOCAL, TRANSPORT
from sbtck.engine import Broker
from sbtck.engine import routing as r
from sbtck.engine.choosing import Chooser, LastChooser
from sbtck.engine.context import command
from sbtck.engine.dialogs import Dialogs
from sbtck.engine.forwarding import Forwarding
from sbtck.engine.model import Conversation, Database, Envelope, Instance, Route
from sbtck.engine.room import Room
from sbtck.engine.routing_attempt import Routing
from sbtck.engine.transmission import Transmission
from sbtck.engine.transmission_queue import BEHIND, DELAYED, TransmissionQueue, Waiting
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind
from tests.variants.rooms import room, router_with


def _implementation(name: str, **attrs: Any) -> ReferenceImplementation:
    broker = type(f"{name}Broker", (Broker,), attrs)
    return ReferenceImplementation(broker_class=broker, name=f"wrong variant: {name}")


def _router(name: str, base: type[Room], **methods: Any) -> ReferenceImplementation:
    """A variant whose one room BASE, the room of the methods it gets wrong, takes METHODS."""
    return _implementation(name, router_class=router_with(room(name, base, **methods)))


def _steps_2_and_3_swapped(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    if not broker:
        named = [x for x in routes if x.service_name == service and x.broker_instance is not None]
        if named:
            return r.Match("RTM-3", named)
    return r.match(routes, service, broker, pending, has, chooser)


def _network_before_mirror(routes: list[Route], has: bool, chooser: Chooser) -> r.Choice | None:
    plain = [x for x in routes if r.is_network(x.address) and not x.mirror_address]
    if plain:
        return r.Choice("RTC-3", plain[0], [x.name for x in plain])
    return r.choose(routes, has, chooser)


def _local_without_service(routes: list[Route], has: bool, chooser: Chooser) -> r.Choice | None:
    return r.choose(routes, True, chooser)


def _every_route_lives(routes: Iterable[Route], now_ms: int) -> list[Route]:
    return sorted(routes, key=lambda x: x.name)


def _alive_at_the_end(routes: Iterable[Route], now_ms: int) -> list[Route]:
    return sorted((x for x in routes if x.expires_ms is None or x.expires_ms >= now_ms), key=lambda x: x.name)


def _step_1_for_any_service(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    if broker:
        found = [x for x in routes if x.broker_instance is not None and x.broker_instance.upper() == broker.upper()]
        if found:
            return r.Match("RTM-1", found)
    return r.match(routes, service, broker, pending, has, chooser)


def _msdb_for_everything(self: Routing, at: Instance, inside: bool, home: str | None) -> tuple[str, dict[str, Route]]:
    return "msdb.sys.routes", at.msdb_routes


def _ignores_broker(
    instance: Instance, service: str, broker: str | None, home: str | None, chooser: Chooser
) -> Database | None:
    return r.locate(instance, service, None, home, chooser)


class _NoAcknowledgementPinning(Dialogs):
    def acknowledge(self, conv: Conversation, db: Database) -> None:
        conv.acknowledged = True


def _step_3_for_any_service(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    found = r.match(routes, service, broker, pending, has, chooser)
    named = [x for x in routes if x.broker_instance is not None]
    if not broker and found.step in ("RTM-4", "RTM-5", "RTM-6", "RTM-7") and named:
        return r.Match("RTM-3", named)
    return found


def alive_at_the_end_of_its_lifetime() -> ReferenceImplementation:
    """Uses a route at the very instant its lifetime ends."""
    return _router("alive_at_the_end_of_its_lifetime", Routing, live=staticmethod(_alive_at_the_end))


def step_1_for_any_service() -> ReferenceImplementation:
    """Step 1 takes routes naming the conversation's broker instance whatever service they are for."""
    return _router("step_1_for_any_service", Routing, match=staticmethod(_step_1_for_any_service))


def step_3_for_any_service() -> ReferenceImplementation:
    """Step 3 takes routes naming a broker instance whatever service they are for."""
    return _router("step_3_for_any_service", Routing, match=staticmethod(_step_3_for_any_service))


def steps_2_and_3_swapped() -> ReferenceImplementation:
    return _router("steps_2_and_3_swapped", Routing, match=staticmethod(_steps_2_and_3_swapped))


def expired_routes_used() -> ReferenceImplementation:
    return _router("expired_routes_used", Routing, live=staticmethod(_every_route_lives))


def network_before_mirror() -> ReferenceImplementation:
    return _router("network_before_mirror", Routing, choose=staticmethod(_network_before_mirror))


def _step_6_without_the_service(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    return r.match(routes, service, broker, pending, True, chooser)


def step_6_without_the_service() -> ReferenceImplementation:
    """Applies step 6 to any conversation that names a broker instance, whether or not this instance holds its
    service (choosing then finds the LOCAL route passed over, RTC-2, so the message goes nowhere else)."""
    return _router("step_6_without_the_service", Routing, match=staticmethod(_step_6_without_the_service))


class _MirrorCopyHoldsItsServices(Routing):
    """Counts a database's services wherever its broker has started, the mirror copy of a mirrored database too."""

    held = False

    def route(
        self, env: Envelope, at: Instance, *, inside: bool, home: str | None, via_transport: bool = False
    ) -> None:
        self.held = any(env.to_service in d.services and d.broker_started for d in at.databases.values())
        super().route(env, at, inside=inside, home=home, via_transport=via_transport)

    def match(
        self,
        routes: list[Route],
        service: str,
        broker: str | None,
        pending: set[tuple[str, str]],
        has: bool,
        chooser: Chooser,
    ) -> r.Match:
        return r.match(routes, service, broker, pending, self.held, chooser)

    def choose(self, routes: list[Route], instance_has_service: bool, chooser: Chooser) -> r.Choice | None:
        return r.choose(routes, self.held, chooser)


def mirror_copy_holds_its_services() -> ReferenceImplementation:
    """Takes the mirror copy of a mirrored database as holding its services where matching and choosing ask whether
    the instance holds the message's service (RTM-6, RTC-2)."""
    return _implementation("mirror_copy_holds_its_services", router_class=router_with(_MirrorCopyHoldsItsServices))


class _AsksEveryDynamicRoute(Routing):
    """At step 4 asks every route to a dynamic routing service not pending for the service, not one."""

    def _emit(self, kind: str, at: Instance, env: Envelope, fields: dict[str, object]) -> None:
        super()._emit(kind, at, env, fields)
        if kind != Kind.ROUTING_REQUESTED:
            return
        table = str(fields["table"])
        routes = at.msdb_routes if table.startswith("msdb.") else at.databases[table.split(".")[0]].routes
        pending = self.requests[f"{at.name}/{table}"]
        for other in sorted(route.name for route in routes.values() if route.dynamic):
            if (other, env.to_service) not in pending:
                pending.add((other, env.to_service))
                super()._emit(kind, at, env, {**fields, "route": other})


def asks_every_dynamic_route() -> ReferenceImplementation:
    """Requests routing information of every route to a dynamic routing service at once (RTM-4: "solicite
    informações de roteamento daquele serviço", of one)."""
    return _implementation("asks_every_dynamic_route", router_class=router_with(_AsksEveryDynamicRoute))


def local_without_service() -> ReferenceImplementation:
    return _router("local_without_service", Routing, choose=staticmethod(_local_without_service))


def forwarding_off_ignored() -> ReferenceImplementation:
    return _router("forwarding_off_ignored", Forwarding, may_leave=lambda self, at, inside: True)


def hop_limit_ignored() -> ReferenceImplementation:
    return _router("hop_limit_ignored", Forwarding, hop_limit_reached=lambda self, env: env.hops > 50)


def partner_without_claim() -> ReferenceImplementation:
    """Treats any partner that answers at all as the principal."""

    def claims(self: Transmission, address: str, route: Route, env: Envelope) -> str:
        target = self.by_address(address)
        return "principal" if target is not None and target.reachable else "unreachable"

    return _router("partner_without_claim", Transmission, claims_principal=claims)


def principal_for_any_broker_instance() -> ReferenceImplementation:
    """A partner claims the role if it is principal for any database, whatever broker instance is named."""

    def claims(self: Transmission, address: str, route: Route, env: Envelope) -> str:
        target = self.by_address(address)
        if target is None or not target.reachable:
            return "unreachable"
        roles = [db.mirroring_role for db in target.databases.values()]
        return "principal" if any(role in ("principal", None) for role in roles) else "not principal"

    return _router("principal_for_any_broker_instance", Transmission, claims_principal=claims)


class _AnswerKeepsTheRequest(Broker):
    @command
    def answer_routing_request(self, instance: str, database: str | None, route: declared.Route) -> None:
        self.routes.create(instance, database, route)  # the request stays pending


def answered_request_stays_pending() -> ReferenceImplementation:
    """The dynamic routing service's answer creates its route but leaves the request pending: once the route is
    gone, no new request is made."""
    return ReferenceImplementation(
        broker_class=_AnswerKeepsTheRequest, name="wrong variant: answered_request_stays_pending"
    )


class _AlterForgetsTheLifetime(Broker):
    @command
    def alter_route(self, instance: str, database: str | None, route: declared.RouteChange) -> None:
        self.routes.alter(instance, database, route)
        if route.lifetime_s is None:
            self.routes.table(instance, database)[route.name].expires_ms = None


def alter_forgets_the_lifetime() -> ReferenceImplementation:
    """ALTER ROUTE without LIFETIME makes the route last for ever instead of keeping its expiry."""
    return ReferenceImplementation(
        broker_class=_AlterForgetsTheLifetime, name="wrong variant: alter_forgets_the_lifetime"
    )


def never_asks_a_lost_principal_again() -> ReferenceImplementation:
    """Once an address has lost the role it is never asked again, so a failback is never followed."""

    def after_losing(self: Transmission, pair: list[str], known: str) -> list[str]:
        lost: set[str] = self.__dict__.setdefault("ever_lost", set())
        lost.add(known)
        return [a for a in pair if a not in lost]

    return _router("never_asks_a_lost_principal_again", Transmission, after_losing=after_losing)


def behind_a_delayed_message_forgotten() -> ReferenceImplementation:
    """Retries only the delayed message itself: the messages queued behind it never follow."""

    def retry(self: TransmissionQueue, waiting: Waiting) -> None:
        line = self.lines.get((waiting.envelope.dialog, waiting.envelope.from_target), [])
        if line and line[0] is waiting:
            line.pop(0)
            place = self.instances[waiting.instance]
            self.routing.route(waiting.envelope, place, inside=waiting.inside, home=waiting.home)

    return _router("behind_a_delayed_message_forgotten", TransmissionQueue, _retry=retry)


def later_messages_pass_a_delayed_one() -> ReferenceImplementation:
    """A message SENT while an earlier one of its conversation is delayed is routed at once, not queued behind it,
    so it can arrive first (the stage found an outside broker delivering a delayed conversation as [1, 2, 3, 0])."""

    def submit(self: TransmissionQueue, env: Envelope, origin: Instance, home: str) -> None:
        line = self.lines.get((env.dialog, env.from_target))
        if line and line[0].status != DELAYED:
            self._wait(env, origin, True, home, BEHIND)
            return
        self.routing.route(env, origin, inside=True, home=home)

    return _router("later_messages_pass_a_delayed_one", TransmissionQueue, submit=submit)


def forwarder_fails_on_a_held_message() -> ReferenceImplementation:
    """Fails when it tries again to send a message it holds for another instance: the crash the stage found in an
    outside forwarder. No scenario can fail it, since it answers nothing wrong: it stops answering (CRASHES)."""

    def retry(self: TransmissionQueue, waiting: Waiting) -> None:
        if not waiting.inside:
            raise RuntimeError(f"the forwarder failed on {waiting.envelope.dialog}, a message it holds")
        TransmissionQueue._retry(self, waiting)

    return _router("forwarder_fails_on_a_held_message", TransmissionQueue, _retry=retry)


def transmission_queue_always_empty() -> ReferenceImplementation:
    """sys.transmission_queue never lists the messages that wait in it (the forwarder's memory is shown right)."""

    def rows(self: TransmissionQueue, forwarded: bool = False) -> list[dict[str, object]]:
        return TransmissionQueue.transmission_rows(self, forwarded=True) if forwarded else []

    return _router("transmission_queue_always_empty", TransmissionQueue, transmission_rows=rows)


def every_reply_numbered_0() -> ReferenceImplementation:
    """Numbers every reply of a dialog 0, so a second reply comes to the initiator as the first again."""

    def send(
        self: Broker, at_ms: int, dialog: str, message_type: str = "DEFAULT", body: str = "", from_target: bool = False
    ) -> dict[str, Any]:
        if from_target and dialog in self.conversations:
            self.conversations[dialog].reply_sequence = 0
        return Broker.send(self, at_ms, dialog, message_type, body, from_target)

    return _implementation("every_reply_numbered_0", send=send)


def pinning_ignored() -> ReferenceImplementation:
    return _implementation("pinning_ignored", dialogs_class=_NoAcknowledgementPinning)


def msdb_for_local_conversations() -> ReferenceImplementation:
    return _router("msdb_for_local_conversations", Routing, table_for=_msdb_for_everything)


def locate_ignores_broker_instance() -> ReferenceImplementation:
    return _router("locate_ignores_broker_instance", Routing, locate=staticmethod(_ignores_broker))


def never_retries_delayed() -> ReferenceImplementation:
    def delay(self: Routing, env: Envelope, at: Instance, inside: bool, home: str | None, why: str) -> None:
        self._emit(Kind.CONVERSATION_DELAYED, at, env, {"step": why})
        self.queue._wait(env, at, inside, home, "delayed")

    return _router("never_retries_delayed", Routing, _delay=delay)


def last_choices() -> ReferenceImplementation:
    """Not wrong: takes the other allowed choice wherever the documents leave one."""
    broker = type("LastChoiceBroker", (Broker,), {"chooser_class": LastChooser})
    return ReferenceImplementation(broker_class=broker, name="reference engine, last choices")


# a failover and then a failback in one world: the workload stage draws that in routing worlds
# (test_capabilities finds it there) but too rarely among worlds of every capability to shrink it in the tests
RARE_IN_MIXED_WORLDS = {"never_asks_a_lost_principal_again"}
# a route the dynamic routing service created, then dropped: worlds drop only R1, R2 and AutoCreatedLocal, so only
# the scenarios (routing/02 [21]) find it; and two routes to dynamic routing services in one table, which the worlds
# never hold (one, "Dynamic"): routing/02 [35]
NOT_IN_WORLDS = {"answered_request_stays_pending", "asks_every_dynamic_route"}
# situations the worlds never draw, which scenarios set up on purpose: service names differing in case
# (routing/02 [23]), a route naming a broker instance but no service (02 [24]), a mirrored route beside a LOCAL
# one for a service the instance holds (03 [11]); and the faults only a decision trace shows (02 [4], 02 [33]),
# while the stage's partial implementations report none
NOT_IN_WORLDS |= {"service_names_matched_without_case", "catch_all_with_a_broker_instance"}
NOT_IN_WORLDS |= {"local_before_mirror_where_held", "step_3_keeps_every_broker_instance", "step_6_without_the_service"}
# a mirrored route's address holding neither the service nor the broker instance the conversation names
# (routing/06 [11] and [13]): the worlds' mirrored routes lead to instances holding the service, where claiming the
# role for any database and for the service's alike is what the documents allow (a probe may ask about the route's
# service, docs/implementing.md section 5)
NOT_IN_WORLDS |= {"principal_for_any_broker_instance"}
# a forwarder with forwarding off and a TRANSPORT route for a message from outside: none in 3,000 worlds
NOT_IN_WORLDS |= {"transport_leaves_without_forwarding"}
# a conversation begun in a database that holds its own target service behind another that holds it too: the worlds'
# initiators have services of their own names (none in 3,000 worlds)
NOT_IN_WORLDS |= {"home_database_not_first"}
# two instances each with a mirrored route of one name to one pair: none in 3,000 worlds
NOT_IN_WORLDS |= {"principal_shared_by_route_name"}


def _by_transport_all_the_same(
    self: Routing, env: Envelope, at: Instance, inside: bool, home: str | None, route: Route
) -> None:
    if route.address.upper() != TRANSPORT or inside or at.forwarding:
        Routing._by(self, env, at, inside, home, route)
        return
    at.forwarding = True  # as if forwarding were on for the message that leaves by TRANSPORT
    try:
        Routing._by(self, env, at, inside, home, route)
    finally:
        at.forwarding = False


def _locate_in_the_instances_order(
    self: Routing, instance: Instance, service: str, broker: str | None, home: str | None, chooser: Chooser
) -> Database | None:
    if broker:
        return r.locate(instance, service, broker, home, chooser)
    return next((db for db in instance.databases.values() if db.online and service in db.services), None)


def home_database_not_first() -> ReferenceImplementation:
    """Looks a LOCAL route's service up in the instance's databases in their own order, not first in the database
    that holds the conversation (RTL-3: "procurando primeiro ... no banco de dados que contém a conversação")."""
    return _router("home_database_not_first", Routing, locate=_locate_in_the_instances_order)


class _ByRouteNameAlone(dict[tuple[str, str], str]):
    """The principals learnt, keyed by route name whatever instance's route learnt it."""

    def __getitem__(self, key: tuple[str, str]) -> str:
        return super().__getitem__(("*", key[1]))

    def __setitem__(self, key: tuple[str, str], value: str) -> None:
        super().__setitem__(("*", key[1]), value)

    def __delitem__(self, key: tuple[str, str]) -> None:
        super().__delitem__(("*", key[1]))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and super().__contains__(("*", key[1]))

    def get(self, key: tuple[str, str], default: Any = None) -> Any:
        return super().get(("*", key[1]), default)


class _PrincipalSharedByRouteName(Transmission):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.principals = _ByRouteNameAlone()


def principal_shared_by_route_name() -> ReferenceImplementation:
    """Keeps the principal a mirrored route learnt by route name, shared by every instance's route of that name: an
    instance's first use of its own route asks no one (RTR-2: "se o Service Broker não entregou anteriormente uma
    mensagem usando a rota")."""
    return _implementation("principal_shared_by_route_name", router_class=router_with(_PrincipalSharedByRouteName))


def transport_leaves_without_forwarding() -> ReferenceImplementation:
    """With forwarding off drops a message from outside only when the chosen route has a network address: by a
    TRANSPORT route it leaves all the same (RTC-5: "se o endereço da rota escolhida não for 'LOCAL'")."""
    return _router("transport_leaves_without_forwarding", Routing, _by=_by_transport_all_the_same)


def answer_rematches_at_once() -> ReferenceImplementation:
    """Matches a delayed conversation again the moment the dynamic routing service answers, not after the time-out
    (RTM-8: "runs the matching process again after a time-out")."""

    class Eager(Broker):
        def answer_routing_request(
            self, at_ms: int, instance: str, database: str | None, route: declared.Route
        ) -> None:
            super().answer_routing_request(at_ms, instance, database, route)
            for head in self.router.queue.heads(DELAYED):
                self.router.queue._retry(head)
            self.clock.run_pending()

    return ReferenceImplementation(broker_class=Eager, name="wrong variant: answer_rematches_at_once")


def _step_3_keeps_every_broker_instance(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    found = r.match(routes, service, broker, pending, has, chooser)
    if found.step != "RTM-3":
        return found
    every = [x for x in routes if x.service_name == service and x.broker_instance is not None]
    return r.Match("RTM-3", every, picked_broker_instance=found.picked_broker_instance)


def step_3_keeps_every_broker_instance() -> ReferenceImplementation:
    """Picks a broker instance at step 3, then keeps the routes of every broker instance as candidates."""
    return _router(
        "step_3_keeps_every_broker_instance", Routing, match=staticmethod(_step_3_keeps_every_broker_instance)
    )


def _case_blind(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    folded = [
        dataclasses.replace(x, service_name=service)
        if x.service_name is not None and x.service_name.lower() == service.lower()
        else x
        for x in routes
    ]
    return r.match(folded, service, broker, pending, has, chooser)


def service_names_matched_without_case() -> ReferenceImplementation:
    """Matches a route's service name to the conversation's whatever their case."""
    return _router("service_names_matched_without_case", Routing, match=staticmethod(_case_blind))


def _catch_all_with_a_broker_instance(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    found = r.match(routes, service, broker, pending, has, chooser)
    loose = [x for x in routes if x.service_name is None and x.broker_instance is not None]
    if found.step in ("RTM-6", "RTM-7") and loose:
        return r.Match("RTM-5", loose)
    return found


def catch_all_with_a_broker_instance() -> ReferenceImplementation:
    """Takes a route that names a broker instance but no service as a catch-all at step 5."""
    return _router("catch_all_with_a_broker_instance", Routing, match=staticmethod(_catch_all_with_a_broker_instance))


def _step_3_despite_the_broker_instance(
    routes: list[Route], service: str, broker: str | None, pending: set[tuple[str, str]], has: bool, chooser: Chooser
) -> r.Match:
    found = r.match(routes, service, broker, pending, has, chooser)
    named = [x for x in routes if x.service_name == service and x.broker_instance is not None]
    if broker and named and found.step in ("RTM-4", "RTM-5", "RTM-6", "RTM-7"):
        return r.Match("RTM-3", named)
    return found


def step_3_despite_the_broker_instance() -> ReferenceImplementation:
    """Applies step 3 to a conversation that names a broker instance."""
    return _router(
        "step_3_despite_the_broker_instance", Routing, match=staticmethod(_step_3_despite_the_broker_instance)
    )


def _local_before_mirror_where_held(routes: list[Route], has: bool, chooser: Chooser) -> r.Choice | None:
    local = [x for x in routes if x.address == LOCAL]
    if has and local and any(x.mirror_address for x in routes):
        return r.Choice("RTC-2", local[0], [x.name for x in local])
    return r.choose(routes, has, chooser)


def local_before_mirror_where_held() -> ReferenceImplementation:
    """Chooses a LOCAL route before a mirrored one when this instance holds the service."""
    return _router("local_before_mirror_where_held", Routing, choose=staticmethod(_local_before_mirror_where_held))


def hops_counted_by_each_forwarder() -> ReferenceImplementation:
    """Each forwarder counts only the times it forwarded a message itself, not how often it was forwarded."""

    class PerForwarder(Forwarding):
        def _counts(self) -> dict[tuple[object, ...], int]:
            counts: dict[tuple[object, ...], int] = self.__dict__.setdefault("forwarded_here", {})
            return counts

        def _place(self, env: Envelope, at: str) -> tuple[object, ...]:
            return (env.dialog, env.from_target, env.sequence, at)

        def hop_limit_reached(self, env: Envelope) -> bool:
            here = self._counts().get(self._place(env, self.__dict__.get("here", "")), 0)
            return here + 1 > self.params.forward_hop_limit

    class NotesWhere(Routing):
        def route(
            self, env: Envelope, at: Instance, *, inside: bool, home: str | None, via_transport: bool = False
        ) -> None:
            self.forwarding.__dict__["here"] = at.name
            super().route(env, at, inside=inside, home=home, via_transport=via_transport)

    class CountsHere(Transmission):
        def _transmit(self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None) -> None:
            if inside:
                super()._transmit(env, at, address, inside, home)
                return
            forwarder = cast(PerForwarder, self.forwarding)
            place = forwarder._place(env, at.name)
            env.hops = forwarder._counts().get(place, 0)
            target = self.by_address(address) if address else None
            if target is not None and address is not None and self.transport.ready(at.name, address):
                forwarder._counts()[place] = env.hops + 1  # before it goes on: the next forwarder may route it at once
            super()._transmit(env, at, address, inside, home)

    router = router_with(PerForwarder, NotesWhere, CountsHere)
    return _implementation("hops_counted_by_each_forwarder", router_class=router)


VARIANTS = [
    "asks_every_dynamic_route",
    "mirror_copy_holds_its_services",
    "step_6_without_the_service",
    "principal_shared_by_route_name",
    "home_database_not_first",
    "transport_leaves_without_forwarding",
    "hops_counted_by_each_forwarder",
    "service_names_matched_without_case",
    "catch_all_with_a_broker_instance",
    "step_3_despite_the_broker_instance",
    "local_before_mirror_where_held",
    "answer_rematches_at_once",
    "step_3_keeps_every_broker_instance",
    "steps_2_and_3_swapped",
    "expired_routes_used",
    "network_before_mirror",
    "local_without_service",
    "forwarding_off_ignored",
    "hop_limit_ignored",
    "partner_without_claim",
    "pinning_ignored",
    "msdb_for_local_conversations",
    "locate_ignores_broker_instance",
    "never_retries_delayed",
    "step_3_for_any_service",
    "alive_at_the_end_of_its_lifetime",
    "step_1_for_any_service",
    "principal_for_any_broker_instance",
    "answered_request_stays_pending",
    "alter_forgets_the_lifetime",
    "never_asks_a_lost_principal_again",
    "behind_a_delayed_message_forgotten",
    "transmission_queue_always_empty",
    "every_reply_numbered_0",
    "later_messages_pass_a_delayed_one",
]
# wrong brokers that fail by crashing, not by a wrong answer: the suite reports an error, the stage an error world
CRASHES = ["forwarder_fails_on_a_held_message"]
