"""Routing: one attempt to route a message where it is, from matching to where it goes.

A message is routed where it is: inside its origin instance with the
initiating database's sys.routes, on arrival from the network with
msdb.sys.routes (RTE-01). Matching (RTM) and choosing (RTC) are the steps
of routing.py; a LOCAL route delivers in this instance (RTL), any other
hands the message to the transmission (transmission.py); nothing to go
by yet, the conversation waits, delayed (RTM-8).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sbtck.contract import LOCAL, TRANSPORT
from sbtck.engine.choosing import (
    CHOSEN_AGAIN,
    DROPPED,
    LOCAL_MISS,
    LOCAL_PASSED_OVER,
    NOT_REPORTED,
    REPORTED_FIRST,
    Chooser,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Database, Envelope, Instance, Route
from sbtck.engine.room import Arrivals, Room
from sbtck.engine.routing import Choice, Match, choose, live, locate, match
from sbtck.engine.routing_memo import Found, RoutingMemo
from sbtck.engine.transmission import transport_address
from sbtck.engine.transmission_queue import BEHIND, DELAYED
from sbtck.observations import Kind


@mypyc_attr(allow_interpreted_subclasses=True)
class Routing(Room):
    def __init__(self, ctx: Context, arrivals: Arrivals) -> None:
        super().__init__(ctx)
        self.arrivals = arrivals
        self.requests: dict[str, set[tuple[str, str]]] = {}
        # what matching and choosing found, while it cannot have changed (sbtck/engine/routing_memo.py)
        self.memo = RoutingMemo(ctx.chooser)

    # the steps of routing, as methods so that a test can build a wrong router
    def live(self, routes: Iterable[Route], now_ms: int) -> list[Route]:
        return live(routes, now_ms)

    def match(
        self,
        routes: list[Route],
        service: str,
        broker: str | None,
        pending: set[tuple[str, str]],
        has_service: bool,
        chooser: Chooser,
    ) -> Match:
        return match(routes, service, broker, pending, has_service, chooser)

    def choose(self, routes: list[Route], instance_has_service: bool, chooser: Chooser) -> Choice | None:
        return choose(routes, instance_has_service, chooser)

    def locate(
        self, instance: Instance, service: str, broker: str | None, home: str | None, chooser: Chooser
    ) -> Database | None:
        return locate(instance, service, broker, home, chooser)

    def table_for(self, at: Instance, inside: bool, home: str | None) -> tuple[str, dict[str, Route]]:
        """RTE-01: the initiating database's sys.routes inside the instance, msdb.sys.routes from outside."""
        if inside and home is not None:
            return f"{home}.sys.routes", at.databases[home].routes
        return "msdb.sys.routes", at.msdb_routes

    def _retried_here(self, env: Envelope, at: Instance) -> bool:
        """Is ENV being routed again, and not arriving? A message sent on past the one ahead of it, which waits at
        another instance (HELD_ELSEWHERE), arrives there as any message does: behind it, or matched on its own
        (ARRIVES_BEHIND)."""
        queue = self.queue
        if queue._retrying is not env:
            return False
        retried = queue._retried
        return retried is None or retried[0] is not queue._sent_past or retried[0].instance == at.name

    def route(
        self, env: Envelope, at: Instance, *, inside: bool, home: str | None, via_transport: bool = False
    ) -> None:
        if not inside and env.from_target and env.to_broker_instance and at.by_broker_instance(env.to_broker_instance):
            self._emit(Kind.REPLY_RECOGNISED, at, env, {"broker_instance": env.to_broker_instance})  # RTE-05
            self._local(env, at, env.to_broker_instance, None, via_transport)
            return
        if not inside and not self._retried_here(env, at) and self.forwarding._arrives_behind(env, at):
            self.queue._wait(env, at, False, home, BEHIND)
            return
        # one routing attempt of this message: the choices below are for it (routes_matched reports it)
        about = env.fields()
        about["at_ms"] = self.clock.now_ms  # which attempt: a message may be routed again later
        self.chooser.about(at.name, about)
        table, routes = self.table_for(at, inside, home)
        key = f"{at.name}/{table}"
        pending = self.requests.get(key)
        if pending is None:
            pending = self.requests[key] = set()
        has_service = at.has_service(env.to_service)
        now = self.clock.now_ms
        found = self.memo.recall(env, at.name, table, len(pending), has_service, now) or self.memo.keep(
            self.match_and_choose(env, table, routes, pending, has_service, self.memo.asking), routes, now
        )
        self._emit(Kind.ROUTES_MATCHED, at, env, {**found.matched, "routes": list(found.routes)})
        if found.request is not None:  # RTM-4: the dynamic routing service is asked
            pending.add((found.request.name, env.to_service))
            self._emit(
                Kind.ROUTING_REQUESTED,
                at,
                env,
                {"route": found.request.name, "service": env.to_service, "table": table},
            )
        if found.choice is None:
            # nothing to send it by yet (or RTC-4, choosing's last step, left nothing: the documents say no more,
            # so it waits as delayed)
            self._delay(env, at, inside, home, found.why)
            return
        choice = found.choice
        route = choice.route
        chosen: dict[str, object] = {"step": choice.step, "route": route.name, "candidates": list(choice.candidates)}
        if route.address.upper() == LOCAL:
            # LOCAL_MISS read as CHOSEN_AGAIN: "poderá retornar à etapa 2 e escolher outra rota"
            matched = [routes[name] for name in found.routes if name in routes]
            again = lambda: self._choose_again(env, at, inside, home, via_transport, matched)  # noqa: E731
            broker = env.to_broker_instance or route.broker_instance
            self._local(env, at, broker, home, via_transport, again, chosen)
            return
        self._emit(Kind.ROUTE_CHOSEN, at, env, chosen)
        self._by(env, at, inside, home, route)

    def _chooses_again(self, env: Envelope, at: Instance) -> bool:
        """LOCAL_MISS, asked of each message whose LOCAL route finds no service: dropped, or chosen again."""
        self._about(env, at.name, LOCAL_MISS)
        return self.chooser.choose(LOCAL_MISS, [DROPPED, CHOSEN_AGAIN]) == CHOSEN_AGAIN

    def _choose_again(
        self, env: Envelope, at: Instance, inside: bool, home: str | None, via_transport: bool, matched: list[Route]
    ) -> None:
        """A LOCAL route found no service where the message is to go (RTL-2, RTL-3): choosing goes on past the LOCAL
        routes (RTC-3, RTC-4); where nothing is left, the conversation waits, delayed."""
        choice = self.choose(matched, False, self.chooser)
        if choice is None or choice.route.address.upper() == LOCAL:
            self._delay(env, at, inside, home, "RTC-4")
            return
        chosen: dict[str, object] = {
            "step": choice.step,
            "route": choice.route.name,
            "candidates": list(choice.candidates),
        }
        self._emit(Kind.ROUTE_CHOSEN, at, env, chosen)
        self._by(env, at, inside, home, choice.route)

    def _by(self, env: Envelope, at: Instance, inside: bool, home: str | None, route: Route) -> None:
        """The message leaves by ROUTE, which is not LOCAL."""
        if not self.forwarding.may_leave(at, inside):
            self._emit(Kind.MESSAGE_DROPPED, at, env, {"rule": "RTC-5", "reason": "message forwarding is not active"})
            return
        if not inside and self.forwarding.hop_limit_reached(env):
            self._emit(Kind.MESSAGE_DROPPED, at, env, {"rule": "RTX-1", "reason": "forwarded too many times"})
            return
        if route.mirror_address:
            self.transmission._mirrored(env, at, route, inside, home)
        elif route.address.upper() == TRANSPORT:
            self.transmission._transmit(env, at, transport_address(env.to_service), inside, home)
        else:
            self.transmission._transmit(env, at, route.address, inside, home)

    def match_and_choose(
        self,
        env: Envelope,
        table: str,
        routes: dict[str, Route],
        pending: set[tuple[str, str]],
        has_service: bool,
        chooser: Chooser,
    ) -> Found:
        """RTM: the routes of TABLE that match the message, step by step; then RTC: the one it goes by."""
        found = self.match(
            self.live(routes.values(), self.clock.now_ms),
            env.to_service,
            env.to_broker_instance,
            pending,
            has_service,
            chooser,
        )
        matched: dict[str, object] = {
            "table": table,
            "step": found.step,
            "routes": [r.name for r in found.routes],
            **({"broker_instance": found.picked_broker_instance} if found.picked_broker_instance else {}),
        }
        names = tuple(r.name for r in found.routes)
        if found.delayed:
            return Found(matched, names, found.step, True, found.request)
        return Found(matched, names, found.step, False, found.request, self.choose(found.routes, has_service, chooser))

    def _local(
        self,
        env: Envelope,
        at: Instance,
        broker: str | None,
        home: str | None,
        via_transport: bool,
        again: Callable[[], None] | None = None,
        chosen: dict[str, object] | None = None,
    ) -> None:
        """RTL-1: a LOCAL route delivers in this instance; the table it came from was chosen by table_for. AGAIN:
        choosing another route, where the service is not found; CHOSEN: the route_chosen of the LOCAL route, reported
        unless choosing passes over it (as RTC-2 passes over LOCAL routes where the instance has no such service)."""
        db = self.locate(at, env.to_service, broker, home, self.chooser)
        if db is None and again is not None and self._chooses_again(env, at):
            if chosen is not None:  # LOCAL_PASSED_OVER: the route it returns from, reported as chosen or not
                about = env.fields()
                about.update(at_ms=self.clock.now_ms, route=chosen["route"])
                about[LOCAL_PASSED_OVER] = True
                self.chooser.about(at.name, about)
                if self.chooser.choose(LOCAL_PASSED_OVER, [REPORTED_FIRST, NOT_REPORTED]) == REPORTED_FIRST:
                    self._emit(Kind.ROUTE_CHOSEN, at, env, chosen)
            again()
            return
        if chosen is not None:
            self._emit(Kind.ROUTE_CHOSEN, at, env, chosen)
        if db is None:
            where = f"the database of broker instance {broker}" if broker else f"instance {at.name}"
            rule = "RTL-2" if broker else "RTL-3"
            self._emit(
                Kind.MESSAGE_DROPPED, at, env, {"rule": rule, "reason": f"no service {env.to_service} in {where}"}
            )
            return
        if via_transport:
            self.arrivals.dispatch(env, at, db)
        else:
            self.arrivals.deliver(env, at, db)

    def _delay(self, env: Envelope, at: Instance, inside: bool, home: str | None, why: str) -> None:
        self._emit(Kind.CONVERSATION_DELAYED, at, env, {"step": why})
        waiting = self.queue._wait(env, at, inside, home, DELAYED)
        self.clock.at(
            self.clock.now_ms + round(self.params.delayed_retry_s * 1000), lambda: self.queue._time_out(waiting)
        )
