"""Transmission and mirrors: a routed message over the transport, sent again while it has not arrived, and the
principal of a mirrored route found and followed (RTR-2..5).
"""

from __future__ import annotations

from dataclasses import replace

from sbtck import catalogue
from sbtck.engine.choosing import (
    AT_ONCE_FROM_OUTSIDE,
    AT_ONCE_THROUGH_THE_DISPATCHER,
    AT_THE_NEXT_NOTIFICATION,
    FORGOTTEN,
    KEPT,
    LOST_PRINCIPAL,
    LOST_PRINCIPAL_TOO,
    OF_THE_BROKER_INSTANCE,
    OF_THE_SERVICE,
    ON_IT_AT_ONCE,
    OVER_THE_NETWORK,
    OWN_ADDRESS,
    PAIR_ASKED_AGAIN,
    PARTNER_ALONE,
    PENDING_ON_OPEN,
    PRINCIPAL_RETRY,
    PROBE_SUBJECT,
    PROBES,
    ROUTED_AGAIN,
    WHEN_DECIDED,
    Reading,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Envelope, Instance, Route
from sbtck.engine.room import Arrivals, Room
from sbtck.engine.transmission_queue import CONNECTING, FAILED, NO_PRINCIPAL, Waiting
from sbtck.engine.transport import Transport
from sbtck.observations import Kind

# the longest a sender that resends waits between two sendings of a message (resend_after_s doubles up to the most
# the catalogue allows it)
RESEND_LONGEST_MS = round(float(catalogue.load().params["resend_after_s"].high or 0) * 1000)


@mypyc_attr(allow_interpreted_subclasses=True)
class Transmission(Room):
    def __init__(self, ctx: Context, transport: Transport, arrivals: Arrivals) -> None:
        super().__init__(ctx)
        self.transport = transport
        self.arrivals = arrivals
        self.resend_first_ms = round(ctx.params.resend_after_s * 1000)
        self._resend_wait_ms = 0  # while a message is sent again: how long until the next time
        # the messages the network loses: True for every transmission, False for the next one only
        self.lost: dict[tuple[str, bool, int], bool] = {}
        self.own_address = Reading(OWN_ADDRESS, OVER_THE_NETWORK, AT_ONCE_FROM_OUTSIDE, AT_ONCE_THROUGH_THE_DISPATCHER)
        self.principal_retry = Reading(PRINCIPAL_RETRY, ROUTED_AGAIN, PAIR_ASKED_AGAIN)
        self.lost_principal = Reading(LOST_PRINCIPAL, KEPT, FORGOTTEN)
        self.probe_subject = Reading(PROBE_SUBJECT, OF_THE_BROKER_INSTANCE, OF_THE_SERVICE)
        self.principals: dict[tuple[str, str], str] = {}
        # the mirrored route each message waiting for its principal chose, by its wait's order
        self.awaiting_principal: dict[int, Route] = {}

    def by_address(self, address: str) -> Instance | None:
        return next((i for i in self.instances.values() if i.address.upper() == address.upper()), None)

    def _transmit(self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None) -> None:
        if inside and at.name in self.transmitter.failed_at.get(env.dialog, ()):
            self.queue._wait(env, at, inside, home, FAILED, address)
            return
        target = self.by_address(address) if address else None
        reading = self.own_address.of(self.chooser) if target is at else OVER_THE_NETWORK
        if reading != OVER_THE_NETWORK:  # RTX-2, without going out over the network and back
            self.routing.route(
                env, at, inside=False, home=None, via_transport=reading == AT_ONCE_THROUGH_THE_DISPATCHER
            )
            return
        # a connection this message opens, if it does: what waits for it may go on it too (PENDING_ON_OPEN)
        link = (at.name, address.upper()) if address is not None else None
        opens = link is not None and link not in self.transport.connections
        if target is None or address is None or not self.transport.ready(at.name, address):
            if not inside and target is not None and self.forwarding.forward_reported.of(self.chooser) == WHEN_DECIDED:
                place = (env.dialog, env.from_target, env.sequence, at.name)
                if place not in self.forwarding.reported_forwards:
                    self.forwarding.reported_forwards.add(place)
                    self._emit(Kind.MESSAGE_FORWARDED, at, env, {"address": target.address, "hops": env.hops + 1})
            self.queue._wait(env, at, inside, home, CONNECTING, address)
            return
        self.transport.used(at.name, address)
        if not inside:
            env.hops += 1
            place = (env.dialog, env.from_target, env.sequence, at.name)
            if place in self.forwarding.reported_forwards:
                self.forwarding.reported_forwards.discard(place)
            else:
                self._emit(Kind.MESSAGE_FORWARDED, at, env, {"address": target.address, "hops": env.hops})
        self._emit(Kind.MESSAGE_TRANSMITTED, at, env, {"address": target.address, "to_instance": target.name})
        if inside and self.resend_first_ms:  # the sender sends it again until it arrives; a forwarder keeps no copy
            wait_ms = self._resend_wait_ms or self.resend_first_ms
            kept = replace(env)  # as it leaves: a forwarder changes the one it holds
            self.clock.at(self.clock.now_ms + wait_ms, lambda: self._send_again(kept, at, address, home, wait_ms))
        lost = (env.dialog, env.from_target, env.sequence)
        if lost in self.lost:
            if not self.lost[lost]:
                del self.lost[lost]
            self._emit(Kind.MESSAGE_LOST_IN_TRANSIT, at, env, {"address": target.address})
        else:
            # RTX-2: an address that resolves to this very instance arrives as from outside, through msdb.sys.routes
            self.routing.route(env, target, inside=False, home=None, via_transport=True)
        if opens and link is not None:
            self._pending_on_open(*link)

    def _pending_on_open(self, instance: str, address: str) -> None:
        """PENDING_ON_OPEN: the messages waiting for the connection this SEND opened go on it now, or when notified."""
        heads = [w for w in self.queue.heads(CONNECTING, instance=instance) if str(w.address).upper() == address]
        if not heads:
            return
        self.chooser.about(instance, {"address": address, "at_ms": self.clock.now_ms, PENDING_ON_OPEN: True})
        if self.chooser.choose(PENDING_ON_OPEN, [AT_THE_NEXT_NOTIFICATION, ON_IT_AT_ONCE]) == ON_IT_AT_ONCE:
            for head in heads:
                self.transmitter.once_connected(head)

    def _send_again(self, kept: Envelope, at: Instance, address: str | None, home: str | None, wait_ms: int) -> None:
        if (kept.dialog, kept.from_target, kept.sequence) in self.arrivals.arrived:
            return
        self._resend_wait_ms = min(2 * wait_ms, RESEND_LONGEST_MS)
        try:
            self._transmit(replace(kept), at, address, True, home)
        finally:
            self._resend_wait_ms = 0

    def claims_principal(self, address: str, route: Route, env: Envelope) -> str:
        """RTR-2: what the instance at ADDRESS answers: the principal (or only) copy of the database asked about is
        there or not. Asked about the route's broker instance, else the conversation's, else the service's database;
        or, where the route names none, about the service's database whatever the conversation names
        (PROBE_SUBJECT)."""
        target = self.by_address(address)
        if target is None or not target.reachable:
            return "unreachable"
        broker = route.broker_instance or env.to_broker_instance
        answer = self._claims(target, broker, env.to_service)
        if route.broker_instance or not broker:
            return answer
        # the reading is asked only where the two subjects answer differently
        by_service = self._claims(target, None, env.to_service)
        if by_service == answer or self.probe_subject.of(self.chooser) != OF_THE_SERVICE:
            return answer
        return by_service

    @staticmethod
    def _claims(target: Instance, broker: str | None, service: str) -> str:
        for db in target.databases.values():
            mine = db.broker_instance == broker.upper() if broker else service in db.services
            if mine and db.mirroring_role in ("principal", None):
                return "principal"
        return "not principal"

    def probe_order(self, route: Route) -> list[str]:
        """RTR-2 asks both addresses "at once"; the order of the two requests is not given."""
        return [route.address, str(route.mirror_address)]

    def after_losing(self, pair: list[str], known: str) -> list[str]:
        """RTR-4 sends to the partner once it claims the role; asking the lost principal again is not ruled out."""
        partner = [a for a in pair if a != known]
        asks = {PARTNER_ALONE: tuple(partner), LOST_PRINCIPAL_TOO: tuple(pair)}
        return partner if self.chooser.choose(PROBES, list(asks), asks) == PARTNER_ALONE else pair

    def _probe(self, at: Instance, env: Envelope, route: Route, address: str) -> bool:
        answer = self.claims_principal(address, route, env)
        self._emit(Kind.PRINCIPAL_PROBE, at, env, {"route": route.name, "address": address, "answer": answer})
        return answer == "principal"

    def _mirrored(self, env: Envelope, at: Instance, route: Route, inside: bool, home: str | None) -> None:
        """RTR-2..5: learn the principal once, stick to it, follow a partner only when it claims the role."""
        key = (at.name, route.name)
        pair = self.probe_order(route)
        known = self.principals.get(key)
        if known is not None and known not in pair:
            # ALTER ROUTE gave the route other addresses: "envia todas as mensagens que usam a rota para a principal"
            # holds for a principal among them, and "o outro endereço do par" is the route's; what the route learnt
            # of another pair says nothing of this one, which is asked anew as at first use (RTR-2)
            del self.principals[key]
            known = None
        if known is not None and self.claims_principal(known, route, env) == "principal":
            self._transmit(env, at, known, inside, home)  # RTR-3: the mirror is not contacted
            return
        to_ask = pair if known is None else self.after_losing(pair, known)
        if known is not None:
            self._emit(
                Kind.PRINCIPAL_LOST,
                at,
                env,
                {"route": route.name, "address": known, "answer": self.claims_principal(known, route, env)},
            )
            if self.lost_principal.of(self.chooser) == FORGOTTEN:
                del self.principals[key]  # the next message or retry asks both, as at first use
        # RTR-2: the first time, both addresses are asked; afterwards only the partner (RTR-4: the principal lost,
        # the message goes to the partner once it claims the role, and waits until one does)
        claiming = [address for address in to_ask if self._probe(at, env, route, address)]
        if claiming:
            self.principals[key] = claiming[0]
            self._transmit(env, at, claiming[0], inside, home)
            return
        waiting = self.queue._wait(env, at, inside, home, NO_PRINCIPAL)
        self.awaiting_principal[waiting.order] = route
        if self.params.principal_retry_s:  # RTR-5 "tenta novamente", as soon as the implementation declares
            self.clock.at(
                self.clock.now_ms + round(self.params.principal_retry_s * 1000), lambda: self._ask_again(waiting)
            )

    def _ask_again(self, waiting: Waiting) -> None:
        """RTR-5 at the declared period: both addresses are tried again, if the message still waits for them."""
        line = self.queue.lines.get((waiting.envelope.dialog, waiting.envelope.from_target), [])
        if self.queue._place_in_line(line, waiting) is not None:
            self.queue._retry(waiting, self._standing(waiting))

    def _standing(self, head: Waiting) -> Route | None:
        """The mirrored route HEAD waits for a principal of, if RTR-5's retry only asks its pair again and the route
        still stands in its table as it was chosen (else the message is routed again)."""
        route = self.awaiting_principal.get(head.order)
        if route is None or self.principal_retry.of(self.chooser) != PAIR_ASKED_AGAIN:
            return None
        _, routes = self.routing.table_for(self.instances[head.instance], head.inside, head.home)
        return route if routes.get(route.name) is route else None


def transport_address(service: str) -> str | None:
    """A TRANSPORT route takes the address from the service name, as in 'TCP://host:4022/Service'."""
    if not service.upper().startswith("TCP://"):
        return None
    rest = service[len("TCP://") :]
    return "TCP://" + rest.split("/", 1)[0]
