"""Moves messages between services: routing, the transport, mirrors, forwarding.

A message is routed where it is: inside its origin instance with the
initiating database's sys.routes, on arrival from the network with
msdb.sys.routes (RTE-01). What cannot go yet waits, in order per
conversation: in the transmission queue of its origin, or - a message being
forwarded - in the forwarder's memory only (PER-5B). A delayed conversation
is matched again after ``delayed_retry_s`` (RTM-8); a message waiting for a
connection goes when the transport opens one (PER-2A); the transmitter
reclassifies dialogs on every 2nd timer notification (PER-2B).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from sbtck import catalogue
from sbtck.engine.choosing import (
    ACKNOWLEDGEMENT_READING,
    AHEAD_GOES_ON,
    ARRIVES_BEHIND,
    AT_ONCE_FROM_OUTSIDE,
    AT_ONCE_THROUGH_THE_DISPATCHER,
    BEHIND_A_DELETED,
    CHOSEN_AGAIN,
    DROPPED,
    FOLLOWS_AT_ONCE,
    FORWARD_REPORTED,
    FORWARD_SPAN,
    HELD_AT_ITS_ORIGIN,
    HELD_ELSEWHERE,
    LOCAL_MISS,
    LOCAL_PASSED_OVER,
    LOST_PRINCIPAL_TOO,
    MATCHED_ON_ITS_OWN,
    NEVER_RECLASSIFIES,
    NOT_REPORTED,
    NOTIFICATION_FIRST,
    OVER_THE_NETWORK,
    OWN_ADDRESS,
    PAIR_ASKED_AGAIN,
    PARTNER_ALONE,
    PRINCIPAL_RETRY,
    PROBES,
    RECLASSIFIED,
    RECLASSIFIED_NEXT,
    RECLASSIFIES,
    RECLASSIFYING,
    REGISTERS_AGAIN,
    REPLY,
    REPORTED_FIRST,
    RETRIED_BEHIND,
    ROUTED_AFTER,
    ROUTED_AGAIN,
    SENT_AFTER,
    SENT_ON,
    STAYS_BEHIND,
    STAYS_REGISTERED,
    TIME_OUT_AND_NOTIFICATION,
    TIME_OUT_FIRST,
    WAITS_BEHIND_IT,
    WAITS_FOR_ITS_TIME_OUT,
    WHEN_DECIDED,
    WHEN_SENT_ON,
    Chooser,
    Reading,
    Span,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import LOCAL, TRANSPORT, Database, Envelope, Instance, Route
from sbtck.engine.routing import Choice, Match, choose, live, locate, match
from sbtck.engine.routing_memo import Found, RoutingMemo
from sbtck.engine.transport import Transport
from sbtck.observations import Kind


class Arrivals(Protocol):
    """Where a routed message ends (the Broker): in the target queue at once, or, having come over the transport,
    through the receiving instance's message dispatcher, which buffers it and may drop it (PER-1C)."""

    # with resending, the messages that have arrived: a copy of one is not sent again
    arrived: set[tuple[str, bool, int]]

    def deliver(self, env: Envelope, at: Instance, db: Database) -> None: ...
    def dispatch(self, env: Envelope, at: Instance, db: Database) -> None: ...


DELAYED = "delayed"
CONNECTING = "waiting for a connection"
NO_PRINCIPAL = "no partner claims to be principal"
BEHIND = "behind an earlier message of the conversation"
FAILED = "failed"
# the longest a sender that resends waits between two sendings of a message (resend_after_s doubles up to the most
# the catalogue allows it)
RESEND_LONGEST_MS = round(float(catalogue.load().params["resend_after_s"].high or 0) * 1000)


@dataclass
class Waiting:
    """A message that cannot go yet."""

    envelope: Envelope
    instance: str
    inside: bool
    home: str | None
    status: str
    received_ms: int
    address: str | None = None
    order: int = 0
    since_ms: int = 0  # when it began this wait (received_ms may be earlier: PER-5B counts from the receipt)
    episode: int = 0  # the order of its first wait where it waits now: a retry that waits again keeps it

    def __init__(
        self,
        envelope: Envelope,
        instance: str,
        inside: bool,
        home: str | None,
        status: str,
        received_ms: int,
        address: str | None = None,
        order: int = 0,
        since_ms: int = 0,
        episode: int = 0,
    ) -> None:
        self.envelope, self.instance, self.inside, self.home = envelope, instance, inside, home
        self.status, self.received_ms, self.address, self.order = status, received_ms, address, order
        self.since_ms, self.episode = since_ms, episode or order

    @property
    def place(self) -> tuple[str, bool]:
        """Where it waits: an instance's transmission queue (inside), or its forwarder (a message from outside)."""
        return self.instance, self.inside


@mypyc_attr(allow_interpreted_subclasses=True)
class Router:
    def __init__(
        self,
        ctx: Context,
        chooser: Chooser,
        transport: Transport,
        arrivals: Arrivals,
    ) -> None:
        self.instances = ctx.instances
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.chooser = chooser
        self.forwarding = Span(FORWARD_SPAN)
        self.resend_first_ms = round(ctx.params.resend_after_s * 1000)
        self._resend_wait_ms = 0  # while a message is sent again: how long until the next time
        self.arrivals = arrivals
        self.transport = transport
        # the messages the network loses: True for every transmission, False for the next one only
        self.lost: dict[tuple[str, bool, int], bool] = {}
        self.failed: dict[str, str] = {}
        self.failed_at: dict[str, set[str]] = {}  # the instances whose transmitters hold each failed dialog
        # instance -> the order number of its last route change; a dialog waiting since before it is touched
        self.metadata_changed: dict[str, int] = {}
        # per instance, since its last reclassification: when each route changed, and the service it names before
        # and after the change (None: any service)
        self.changed_services: dict[str, list[tuple[int, str | None]]] = {}
        self._order = 0
        self.last_reclassified_ms: dict[str, int] = {}
        self.reclassifying: str | None = None  # RECLASSIFYING, asked at the first reclassification
        self.acknowledgement_reading = Reading(ACKNOWLEDGEMENT_READING, SENT_AFTER, ROUTED_AFTER)
        self.principal_retry = Reading(PRINCIPAL_RETRY, ROUTED_AGAIN, PAIR_ASKED_AGAIN)
        # the mirrored route each message waiting for its principal chose, by its wait's order
        self.awaiting_principal: dict[int, Route] = {}
        self.own_address = Reading(OWN_ADDRESS, OVER_THE_NETWORK, AT_ONCE_FROM_OUTSIDE, AT_ONCE_THROUGH_THE_DISPATCHER)
        self.forward_reported = Reading(FORWARD_REPORTED, WHEN_SENT_ON, WHEN_DECIDED)
        self.held_elsewhere = Reading(HELD_ELSEWHERE, HELD_AT_ITS_ORIGIN, SENT_ON)
        self._retry_at = 0  # where in its line the wait being retried stood: waiting again, it stands there again
        # the waits routed again by their time-out at this instant, by instant: a notification at the same instant
        # may come before them (TIME_OUT_AND_NOTIFICATION)
        self.timed_out: tuple[int, list[Waiting]] = (-1, [])
        # the messages, by place, whose forward was reported when decided and is not done yet
        self.reported_forwards: set[tuple[str, bool, int, str]] = set()
        # per conversation and direction, in sending order: only the head is ever routed (sent on, HELD_ELSEWHERE,
        # the first waiting at each instance)
        self.lines: dict[tuple[str, bool], list[Waiting]] = {}
        self._retrying: Envelope | None = None
        # the wait being retried, and the message's hops then: a message that waits again where it waited keeps
        # the instant it was received
        self._retried: tuple[Waiting, int] | None = None
        self.requests: dict[str, set[tuple[str, str]]] = {}
        self.principals: dict[tuple[str, str], str] = {}
        # what matching and choosing found, while it cannot have changed (sbtck/engine/routing_memo.py)
        self.memo = RoutingMemo(chooser)

    # ------------------------------------------------------------ addresses
    def by_address(self, address: str) -> Instance | None:
        return next((i for i in self.instances.values() if i.address.upper() == address.upper()), None)

    def _emit(self, kind: str, at: Instance, env: Envelope, fields: dict[str, object]) -> None:
        """An event of a message at a place: the message's fields, then FIELDS, the event's own."""
        event: dict[str, object] = {
            "at_ms": self.clock.now_ms,
            "kind": kind,
            "instance": at.name,
            "dialog": env.dialog,
            "message_sequence_number": env.sequence,
            "from_target": env.from_target,
        }
        event.update(fields)
        self.log.add(event)

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

    def may_leave(self, at: Instance, inside: bool) -> bool:
        """RTC-5: a message from outside leaves by a non-LOCAL route only while forwarding is active."""
        return inside or at.forwarding

    def hop_limit_reached(self, env: Envelope) -> bool:
        """RTX-1: forwarding counts, so a loop cannot forward a message for ever."""
        return env.hops + 1 > self.params.forward_hop_limit

    def table_for(self, at: Instance, inside: bool, home: str | None) -> tuple[str, dict[str, Route]]:
        """RTE-01: the initiating database's sys.routes inside the instance, msdb.sys.routes from outside."""
        if inside and home is not None:
            return f"{home}.sys.routes", at.databases[home].routes
        return "msdb.sys.routes", at.msdb_routes

    # ------------------------------------------------------- transmission queue
    def submit(self, env: Envelope, origin: Instance, home: str) -> None:
        """A message SENT at its origin: it queues behind any earlier message of its conversation here, and behind
        one waiting at another instance as HELD_ELSEWHERE reads it."""
        line = self.lines.get((env.dialog, env.from_target))
        if not line:
            self.route(env, origin, inside=True, home=home)
            return
        # held here: behind one in this instance's transmission queue, not one handled here as from outside (RTX-2)
        here = any(w.place == (origin.name, True) for w in line)
        if not here and self.held_elsewhere.taken is None:
            self._about(env, origin.name, HELD_ELSEWHERE)  # the reading is asked here: of this message, now
        if here or self.held_elsewhere.of(self.chooser) != SENT_ON:
            self._wait(env, origin, True, home, BEHIND)
            return
        self.route(env, origin, inside=True, home=home)

    def _arrives_behind(self, env: Envelope, at: Instance) -> bool:
        """ARRIVES_BEHIND: where an earlier message of its conversation waits here (one sent on past an instance
        that held it, or overtaken), the conversation is delayed or waits here: the message waits behind it, or
        is matched on its own."""
        line = self.lines.get((env.dialog, env.from_target), ())
        if not any(w.instance == at.name for w in line):
            return False
        self._about(env, at.name, ARRIVES_BEHIND)
        return self.chooser.choose(ARRIVES_BEHIND, [WAITS_BEHIND_IT, MATCHED_ON_ITS_OWN]) == WAITS_BEHIND_IT

    def _about(self, env: Envelope, instance: str, kind: str) -> None:
        """Tell the chooser that the next choice, of KIND, is about ENV at INSTANCE now (the search reads the
        implementation's pick from what that message did there then)."""
        about = env.fields()
        about["at_ms"], about[kind] = self.clock.now_ms, True
        self.chooser.about(instance, about)

    def _sent_on(self) -> bool:
        """HELD_ELSEWHERE read as SENT_ON: a line may hold a conversation's waits at several instances, each
        instance's first routed on its own (otherwise only a line's first is ever routed)."""
        return self.held_elsewhere.taken == SENT_ON

    def _follows_at_once(self, nxt: Waiting) -> bool:
        """AHEAD_GOES_ON: a message delayed by its own matching behind the one that went on follows it at once, or
        waits for its own time-out; one held behind it, never matched, follows."""
        if nxt.status != DELAYED:
            return True
        self._about(nxt.envelope, nxt.instance, AHEAD_GOES_ON)
        return self.chooser.choose(AHEAD_GOES_ON, [FOLLOWS_AT_ONCE, WAITS_FOR_ITS_TIME_OUT]) == FOLLOWS_AT_ONCE

    def _left_behind(self, line: list[Waiting], start: int, gone: Waiting) -> Waiting | None:
        """The first message held behind GONE where it waited, now that GONE waits at another place, if it is
        routed and sent on (HELD_ELSEWHERE, asked here as at a SEND: it is held then for a message elsewhere only)."""
        held = next((w for w in line[start:] if w.place == gone.place), None)
        if held is None or held.status != BEHIND or not held.inside:
            return None
        if self.held_elsewhere.taken is None:
            self._about(held.envelope, held.instance, HELD_ELSEWHERE)
        return held if self.held_elsewhere.of(self.chooser) == SENT_ON else None

    def _follows(self, gone: Waiting, nxt: Waiting) -> bool:
        """Does NXT, next in line, follow GONE at once? Where the line holds one instance's waits and those held
        behind them, always; sent on, only what waits at GONE's instance or behind it."""
        return not self._sent_on() or nxt.place == gone.place or nxt.status == BEHIND

    def _wait(
        self, env: Envelope, at: Instance, inside: bool, home: str | None, status: str, address: str | None = None
    ) -> Waiting:
        self._order += 1
        received, episode = self.clock.now_ms, self._order
        again = self._retried
        if again is not None and (again[0].envelope, again[0].instance, again[0].inside, again[1]) == (
            env,
            at.name,
            inside,
            env.hops,
        ):
            # still where it was received (not sent on and back): it has waited since then (PER-5B's 60 seconds)
            received, episode = again[0].received_ms, again[0].episode
        waiting = Waiting(
            env, at.name, inside, home, status, received, address, self._order, self.clock.now_ms, episode
        )
        line = self.lines.setdefault((env.dialog, env.from_target), [])
        if self._retrying is env:
            line.insert(self._retry_at, waiting)
        else:
            line.append(waiting)
        self._emit(
            Kind.TRANSMISSION_PENDING, at, env, {"status": status if address is None else f"{status} to {address}"}
        )
        return waiting

    def _time_out(self, waiting: Waiting) -> None:
        """A delayed message's time-out (RTM-8): the head of its line is routed again; one behind an earlier message
        of its conversation, delayed by its own matching, is matched again alone or waits for it (RETRIED_BEHIND)."""
        line = self.lines.get((waiting.envelope.dialog, waiting.envelope.from_target), [])
        if self._place_in_line(line, waiting) is not None:
            if self.timed_out[0] != self.clock.now_ms:
                self.timed_out = (self.clock.now_ms, [])
            self.timed_out[1].append(waiting)
            self._retry(waiting)
            return
        at = next((i for i, w in enumerate(line) if w is waiting), None)
        if at is None:
            return  # gone on meanwhile: its time-out was for a wait that is over
        self._about(waiting.envelope, waiting.instance, RETRIED_BEHIND)
        if self.chooser.choose(RETRIED_BEHIND, [WAITS_BEHIND_IT, MATCHED_ON_ITS_OWN]) == MATCHED_ON_ITS_OWN:
            self._retry(waiting, alone_at=at)

    def _retry(self, waiting: Waiting, pair_of: Route | None = None, alone_at: int | None = None) -> None:
        """Route the head of a line again, and those behind it that can follow; with PAIR_OF, the mirrored route
        the head waits for a principal of, ask its two addresses again instead (PAIR_ASKED_AGAIN); with ALONE_AT,
        route only the message standing there, wherever it stands (RETRIED_BEHIND)."""
        key = (waiting.envelope.dialog, waiting.envelope.from_target)
        line = self.lines.get(key, [])
        while (at := self._place_in_line(line, waiting) if alone_at is None else alone_at) is not None:
            line.pop(at)
            self.awaiting_principal.pop(waiting.order, None)
            env, place = waiting.envelope, self.instances[waiting.instance]
            self._emit(Kind.ROUTING_RETRIED, place, env, {})
            self._retrying, self._retried, self._retry_at = env, (waiting, env.hops), at
            try:
                if pair_of is not None:
                    self._mirrored(env, place, pair_of, waiting.inside, waiting.home)
                else:
                    self.route(env, place, inside=waiting.inside, home=waiting.home, via_transport=not waiting.inside)
            finally:
                self._retrying, self._retried, self._retry_at = None, None, 0
            pair_of = None  # those behind it are routed as they come
            if alone_at is not None or len(line) <= at:
                break
            if line[at].envelope is env:
                # it waits again; if elsewhere now, what it left held behind it here is held for it, or sent on
                left = self._left_behind(line, at + 1, waiting) if line[at].place != waiting.place else None
                if left is None:
                    break
                waiting = left
                continue
            if not self._follows(waiting, line[at]) or not self._follows_at_once(line[at]):
                break
            waiting = line[at]  # the head went on its way: the next in line follows at once
        if not line:
            self.lines.pop(key, None)

    def _place_in_line(self, line: list[Waiting], waiting: Waiting) -> int | None:
        """Where WAITING stands in LINE if it is routed next: first in line, or, sent on, first at its instance."""
        if line and line[0] is waiting:
            return 0
        if not self._sent_on():
            return None
        for at, w in enumerate(line):
            if w.place == waiting.place:
                return at if w is waiting else None
        return None

    def heads(self, *statuses: str, instance: str | None = None) -> list[Waiting]:
        """The first message of each line in one of STATUSES (waiting at INSTANCE, when named); sent on, the
        first at each instance."""
        if not self._sent_on():
            return [
                line[0]
                for line in self.lines.values()
                if line and line[0].status in statuses and (instance is None or line[0].instance == instance)
            ]
        return [
            w
            for line in self.lines.values()
            for w in self._firsts(line)
            if w.status in statuses and instance in (None, w.instance)
        ]

    def _firsts(self, line: list[Waiting]) -> list[Waiting]:
        """The waits of LINE routed next: its first, or, sent on, the first at each instance."""
        if not self._sent_on():
            return line[:1]
        firsts: dict[tuple[str, bool], Waiting] = {}
        for w in line:
            firsts.setdefault(w.place, w)
        return list(firsts.values())

    def connect_and_send(self) -> None:
        """PER-2A: connect to destinations with pending messages that are not suppressed, then send."""
        waiting = self.heads(CONNECTING)
        opened = set(self.transport.connect_pending([(w.instance, str(w.address).upper()) for w in waiting]))
        for head in waiting:
            if (head.instance, str(head.address).upper()) in opened:
                self.once_connected(head)
        if not self.params.principal_retry_s:  # else each at its own time (_ask_again)
            for head in self.heads(NO_PRINCIPAL):
                self._retry(head, self._standing(head))  # RTR-5: both addresses are tried again

    def once_connected(self, head: Waiting) -> None:
        """A message that waited for its connection is routed again; the documents do not say it is not."""
        self._retry(head)

    def reclassify(self, instance: str) -> None:
        """PER-2B: dialogs touched by metadata changes, route expirations or failures register again."""
        since = self.last_reclassified_ms.get(instance, -1)
        self.last_reclassified_ms[instance] = self.clock.now_ms
        changed = self.metadata_changed.pop(instance, 0)
        changes = self.changed_services.pop(instance, [])
        heads = self._as_notified_first(
            instance, self.heads(DELAYED, CONNECTING, NO_PRINCIPAL, FAILED, instance=instance)
        )
        # the expiries are looked at only when a dialog waits here: this runs twice a notification per instance
        touched = [h for h in heads if h.status == FAILED or h.order < changed] if heads else []
        expired = self._expired_since(instance, since) if heads and (len(touched) < len(heads) or changed) else []
        default = heads if expired else touched
        if heads and (changed or expired) and self._reclassifies():
            chosen = [
                h for h in heads if h.status == FAILED or self._selects(h, h in default, changed, changes, expired)
            ]
        else:
            chosen = default
        if chosen and not self._reclassifies():
            chosen = []
        if self.failed and self._reclassifies():
            chosen += [h for h in heads if h not in chosen and self._failed_waiting_otherwise(h, instance)]
        if len(chosen) > 1:
            chosen = self._in_order(instance, chosen)
        dialogs = [h.envelope.dialog for h in chosen]
        if self.failed and self._reclassifies():
            dialogs += self._idle_failures(instance, {h.envelope.dialog for h in heads})
        self.log.add(
            {
                "instance": instance,
                "dialogs": dialogs,
                "at_ms": self.clock.now_ms,
                "kind": Kind.TRANSMITTER_RECLASSIFIED,
            }
        )
        retried = self.timed_out[1] if self.timed_out[0] == self.clock.now_ms else []
        for head in chosen:
            self._resume(head.envelope.dialog, instance)
            if not any(head is w for w in retried):  # routed again at this instant already, by its time-out
                self._retry(head)

    def _as_notified_first(self, instance: str, heads: list[Waiting]) -> list[Waiting]:
        """HEADS as the reclassification finds them; a message its time-out routed again at this instant is found as
        it waited before, where the notification comes first (TIME_OUT_AND_NOTIFICATION)."""
        at, retried = self.timed_out
        if at != self.clock.now_ms:
            return heads
        for before in retried:
            if before.instance != instance:
                continue
            self._about(before.envelope, instance, TIME_OUT_AND_NOTIFICATION)
            options = [TIME_OUT_FIRST, NOTIFICATION_FIRST]
            if self.chooser.choose(TIME_OUT_AND_NOTIFICATION, options) == NOTIFICATION_FIRST:
                key = (before.envelope.dialog, before.envelope.from_target, before.place)
                heads = [h for h in heads if (h.envelope.dialog, h.envelope.from_target, h.place) != key] + [before]
        return heads

    def _failed_waiting_otherwise(self, head: Waiting, instance: str) -> bool:
        """RECLASSIFIED for a failed dialog whose message waits here for something else (its connection, its
        principal, a route): PER-2B resumes dialogs "that failed earlier for resource or security reasons", and
        one the fault found waiting has failed or not as one reads it; it registers again, and so resumes, or stays
        as it waits until the transmitter tries it (the reference's pick)."""
        dialog = head.envelope.dialog
        if head.status == FAILED or instance not in self.failed_at.get(dialog, ()):
            return False
        self._about(head.envelope, head.instance, RECLASSIFIED)
        return self.chooser.choose(RECLASSIFIED, [STAYS_REGISTERED, REGISTERS_AGAIN]) == REGISTERS_AGAIN

    def _idle_failures(self, instance: str, waiting: set[str]) -> list[str]:
        """RECLASSIFIED for a failed dialog with nothing waiting here: "all or selected dialogs", so it may register
        again, and so resume, or stay failed until a message of it waits (the reference's pick)."""
        resumed = []
        for dialog in [d for d in self.failed if instance in self.failed_at.get(d, ()) and d not in waiting]:
            about: dict[str, object] = {"dialog": dialog, "message_sequence_number": -1, "from_target": False}
            about["at_ms"], about[RECLASSIFIED] = self.clock.now_ms, True
            self.chooser.about(instance, about)
            if self.chooser.choose(RECLASSIFIED, [STAYS_REGISTERED, REGISTERS_AGAIN]) == REGISTERS_AGAIN:
                self._resume(dialog, instance)
                resumed.append(dialog)
        return resumed

    def _in_order(self, instance: str, heads: list[Waiting]) -> list[Waiting]:
        """RECLASSIFIED_NEXT: the order the documents do not give, one dialog at a time."""
        left = {h.envelope.dialog + (REPLY if h.envelope.from_target else ""): h for h in heads}
        ordered = []
        while len(left) > 1:
            self.chooser.about(instance, {RECLASSIFIED_NEXT: True, "at_ms": self.clock.now_ms})
            ordered.append(left.pop(self.chooser.choose(RECLASSIFIED_NEXT, list(left))))
        return ordered + list(left.values())

    def _selects(
        self,
        head: Waiting,
        by_default: bool,
        changed: int,
        changes: list[tuple[int, str | None]],
        expired: list[Route],
    ) -> bool:
        """RECLASSIFIED: "all or selected dialogs" - always one that a route changed or expired since it began to
        wait could match, so the change is taken up; the chooser's, one that has waited here since before the
        change, or is held for its connection or principal (BY_DEFAULT: the reference's pick); else none."""
        service = head.envelope.to_service
        if any(order > head.order and named in (None, service) for order, named in changes) or any(
            int(r.expires_ms or 0) > head.since_ms and r.service_name in (None, service) for r in expired
        ):
            return True
        if (
            not by_default
            and head.episode > changed
            and not (head.inside and head.status in (CONNECTING, NO_PRINCIPAL))
        ):
            return False  # it began to wait after the change: a delayed one is matched again by its own retries
        options = [REGISTERS_AGAIN, STAYS_REGISTERED] if by_default else [STAYS_REGISTERED, REGISTERS_AGAIN]
        self._about(head.envelope, head.instance, RECLASSIFIED)
        return self.chooser.choose(RECLASSIFIED, options) == REGISTERS_AGAIN

    def acknowledged(self, dialog: str, broker_instance: str) -> None:
        """RTE-04: the initiator's messages still waiting to be routed carry the target's broker instance, or not."""
        waiting = [w for w in self.lines.get((dialog, False), ()) if w.inside]
        if not waiting:
            return
        if self.acknowledgement_reading.of(self.chooser) == ROUTED_AFTER:
            for w in waiting:
                w.envelope.to_broker_instance = broker_instance

    def _reclassifies(self) -> bool:
        """RECLASSIFYING, asked once: PER-2B's reclassification, or none (open without periodic_tasks)."""
        if self.reclassifying is None:
            self.reclassifying = self.chooser.choose(RECLASSIFYING, [RECLASSIFIES, NEVER_RECLASSIFIES])
        return self.reclassifying == RECLASSIFIES

    def _expired_since(self, instance: str, since: int) -> list[Route]:
        at = self.instances[instance]
        tables = [at.msdb_routes, *(d.routes for d in at.databases.values())]
        return [r for t in tables for r in t.values() if since < (r.expires_ms or -2) <= self.clock.now_ms]

    def route_changed(self, instance: str, *services: str | None) -> None:
        """A route of INSTANCE was created, altered or dropped; SERVICES: the service it named before and after."""
        self._order += 1
        self.memo.routes_changed()
        self.metadata_changed[instance] = self._order
        self.changed_services.setdefault(instance, []).extend((self._order, named) for named in services)

    def fail_dialog(self, dialog: str, reason: str, ends: Iterable[str] = ()) -> None:
        """A fault: the transmitter cannot send the dialog's messages (memory, security) until reclassified; ENDS:
        the instances of its endpoints, whose transmitters hold it."""
        self.failed[dialog] = reason
        self.failed_at[dialog] = set(ends)

    def _resume(self, dialog: str, instance: str) -> None:
        """PER-2B: INSTANCE's transmitter registered DIALOG again, and sends it; the other end's transmitter holds it
        until it reclassifies it in turn (each instance has its own transmitter, with which a dialog registers)."""
        at = self.failed_at.get(dialog)
        if at is None:
            return
        at.discard(instance)
        if not at:
            del self.failed[dialog], self.failed_at[dialog]

    def forget_stale_forwarded(self) -> None:
        """PER-5B: a message not forwarded within 60 seconds of receipt is deleted."""
        limit = int(self.params.forward_stale_s * 1000)
        gone_from: list[list[Waiting]] = []
        for key, line in list(self.lines.items()):
            for waiting in [
                w
                for w in line
                if not w.inside and self.forwarding.over(self.clock.now_ms, w.received_ms + limit, self.chooser)
            ]:
                line.remove(waiting)
                gone_from.append(line)
                env = waiting.envelope
                self.reported_forwards.discard((env.dialog, env.from_target, env.sequence, waiting.instance))
                self._emit(Kind.FORWARDED_MESSAGE_DELETED, self.instances[waiting.instance], waiting.envelope, {})
            if not line:
                del self.lines[key]
        # BEHIND_A_DELETED: what waited behind a deleted message follows it as it would had it gone on, or stays
        behind = {id(w): w for line in gone_from for w in self._firsts(line) if w.status == BEHIND}
        for held in behind.values():
            self._about(held.envelope, held.instance, BEHIND_A_DELETED)
            if self.chooser.choose(BEHIND_A_DELETED, [STAYS_BEHIND, FOLLOWS_AT_ONCE]) == FOLLOWS_AT_ONCE:
                self._retry(held)

    # -------------------------------------------------------------- routing
    def route(
        self, env: Envelope, at: Instance, *, inside: bool, home: str | None, via_transport: bool = False
    ) -> None:
        if not inside and env.from_target and env.to_broker_instance and at.by_broker_instance(env.to_broker_instance):
            self._emit(Kind.REPLY_RECOGNISED, at, env, {"broker_instance": env.to_broker_instance})  # RTE-05
            self._local(env, at, env.to_broker_instance, None, via_transport)
            return
        if not inside and self._retrying is not env and self._arrives_behind(env, at):
            self._wait(env, at, False, home, BEHIND)
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
        if not self.may_leave(at, inside):
            self._emit(Kind.MESSAGE_DROPPED, at, env, {"rule": "RTC-5", "reason": "message forwarding is not active"})
            return
        if not inside and self.hop_limit_reached(env):
            self._emit(Kind.MESSAGE_DROPPED, at, env, {"rule": "RTX-1", "reason": "forwarded too many times"})
            return
        if route.mirror_address:
            self._mirrored(env, at, route, inside, home)
        elif route.address.upper() == TRANSPORT:
            self._transmit(env, at, _transport_address(env.to_service), inside, home)
        else:
            self._transmit(env, at, route.address, inside, home)

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
        waiting = self._wait(env, at, inside, home, DELAYED)
        self.clock.at(self.clock.now_ms + round(self.params.delayed_retry_s * 1000), lambda: self._time_out(waiting))

    # ------------------------------------------------------------ transport
    def _transmit(self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None) -> None:
        if inside and at.name in self.failed_at.get(env.dialog, ()):
            self._wait(env, at, inside, home, FAILED, address)
            return
        target = self.by_address(address) if address else None
        reading = self.own_address.of(self.chooser) if target is at else OVER_THE_NETWORK
        if reading != OVER_THE_NETWORK:  # RTX-2, without going out over the network and back
            self.route(env, at, inside=False, home=None, via_transport=reading == AT_ONCE_THROUGH_THE_DISPATCHER)
            return
        if target is None or address is None or not self.transport.ready(at.name, address):
            if not inside and target is not None and self.forward_reported.of(self.chooser) == WHEN_DECIDED:
                place = (env.dialog, env.from_target, env.sequence, at.name)
                if place not in self.reported_forwards:
                    self.reported_forwards.add(place)
                    self._emit(Kind.MESSAGE_FORWARDED, at, env, {"address": target.address, "hops": env.hops + 1})
            self._wait(env, at, inside, home, CONNECTING, address)
            return
        self.transport.used(at.name, address)
        if not inside:
            env.hops += 1
            place = (env.dialog, env.from_target, env.sequence, at.name)
            if place in self.reported_forwards:
                self.reported_forwards.discard(place)
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
            return
        # RTX-2: an address that resolves to this very instance arrives as from outside, through msdb.sys.routes
        self.route(env, target, inside=False, home=None, via_transport=True)

    def _send_again(self, kept: Envelope, at: Instance, address: str | None, home: str | None, wait_ms: int) -> None:
        if (kept.dialog, kept.from_target, kept.sequence) in self.arrivals.arrived:
            return
        self._resend_wait_ms = min(2 * wait_ms, RESEND_LONGEST_MS)
        try:
            self._transmit(replace(kept), at, address, True, home)
        finally:
            self._resend_wait_ms = 0

    def claims_principal(self, address: str, route: Route, env: Envelope) -> str:
        target = self.by_address(address)
        if target is None or not target.reachable:
            return "unreachable"
        broker = route.broker_instance or env.to_broker_instance
        for db in target.databases.values():
            mine = db.broker_instance == broker.upper() if broker else env.to_service in db.services
            if mine and db.mirroring_role in ("principal", None):
                return "principal"
        return "not principal"

    # Two choices the documents leave open; tests/variants/allowed.py takes the other of each.
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
        # RTR-2: the first time, both addresses are asked; afterwards only the partner (RTR-4: the principal lost,
        # the message goes to the partner once it claims the role, and waits until one does)
        claiming = [address for address in to_ask if self._probe(at, env, route, address)]
        if claiming:
            self.principals[key] = claiming[0]
            self._transmit(env, at, claiming[0], inside, home)
            return
        waiting = self._wait(env, at, inside, home, NO_PRINCIPAL)
        self.awaiting_principal[waiting.order] = route
        if self.params.principal_retry_s:  # RTR-5 "tenta novamente", as soon as the implementation declares
            self.clock.at(
                self.clock.now_ms + round(self.params.principal_retry_s * 1000), lambda: self._ask_again(waiting)
            )

    def _ask_again(self, waiting: Waiting) -> None:
        """RTR-5 at the declared period: both addresses are tried again, if the message still waits for them."""
        line = self.lines.get((waiting.envelope.dialog, waiting.envelope.from_target), [])
        if self._place_in_line(line, waiting) is not None:
            self._retry(waiting, self._standing(waiting))

    def _standing(self, head: Waiting) -> Route | None:
        """The mirrored route HEAD waits for a principal of, if RTR-5's retry only asks its pair again and the route
        still stands in its table as it was chosen (else the message is routed again)."""
        route = self.awaiting_principal.get(head.order)
        if route is None or self.principal_retry.of(self.chooser) != PAIR_ASKED_AGAIN:
            return None
        _, routes = self.table_for(self.instances[head.instance], head.inside, head.home)
        return route if routes.get(route.name) is route else None

    # --------------------------------------------------------------- views
    def transmission_rows(self, forwarded: bool = False) -> list[dict[str, object]]:
        """sys.transmission_queue; with ``forwarded``, the forwarder's memory instead, which no queue holds."""
        return [
            {
                "instance": w.instance,
                **w.envelope.fields(),
                "to_service_name": w.envelope.to_service,
                "transmission_status": w.status,
                "received_ms": w.received_ms,
            }
            for line in self.lines.values()
            for w in line
            if w.inside != forwarded
        ]


class SendsOnceConnected(Router):
    """A message waiting for a connection goes on the address it was routed to, without being matched again.

    The documents leave open whether a message is matched again when its
    connection opens (``Router.once_connected``): this is the other choice.
    """

    def once_connected(self, head: Waiting) -> None:
        key = (head.envelope.dialog, head.envelope.from_target)
        line = self.lines[key]
        at = next(i for i, w in enumerate(line) if w is head)
        line.pop(at)
        self._retrying, self._retry_at = head.envelope, at
        try:
            self._transmit(head.envelope, self.instances[head.instance], head.address, head.inside, head.home)
        finally:
            self._retrying, self._retry_at = None, 0
        if len(line) > at and line[at].envelope is not head.envelope and self._follows(head, line[at]):
            self._retry(line[at])  # the next in line follows at once
        elif not line:
            self.lines.pop(key, None)


def _transport_address(service: str) -> str | None:
    """A TRANSPORT route takes the address from the service name, as in 'TCP://host:4022/Service'."""
    if not service.upper().startswith("TCP://"):
        return None
    rest = service[len("TCP://") :]
    return "TCP://" + rest.split("/", 1)[0]
