"""The transmission queue: the messages that cannot go yet, in order per conversation, and how they go on.

A message waits in the transmission queue of its origin or - a message
being forwarded - in the forwarder's memory only (PER-5B), behind any
earlier message of its conversation. A delayed conversation is matched
again after ``delayed_retry_s`` (RTM-8); only the head of a line is ever
routed again, and those behind it follow as they can.
"""

from __future__ import annotations

from dataclasses import dataclass

from sbtck import views
from sbtck.engine.choosing import (
    AHEAD_GOES_ON,
    FOLLOWS_AT_ONCE,
    HELD_AT_ITS_ORIGIN,
    HELD_ELSEWHERE,
    HELD_ELSEWHERE_MOSTLY,
    MATCHED_ON_ITS_OWN,
    RETRIED_BEHIND,
    SENT_ON,
    WAITS_BEHIND_IT,
    WAITS_FOR_ITS_TIME_OUT,
    Reading,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Envelope, Instance, Route
from sbtck.engine.room import Room
from sbtck.observations import Kind

DELAYED, CONNECTING, NO_PRINCIPAL = views.STATUS_DELAYED, views.STATUS_CONNECTING, views.STATUS_NO_PRINCIPAL
BEHIND, FAILED = views.STATUS_BEHIND, views.STATUS_FAILED


@dataclass(init=False)
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
class TransmissionQueue(Room):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        # per conversation and direction, in sending order: only the head is ever routed (sent on, HELD_ELSEWHERE,
        # the first waiting at each instance)
        self.lines: dict[tuple[str, bool], list[Waiting]] = {}
        # the order of each wait and route change: a dialog waiting since before a change is touched by it
        self._order = 0
        # has any message been sent on past one held elsewhere (HELD_ELSEWHERE)? Then a line may hold its
        # conversation's waits at several instances, each instance's first routed on its own; until then only a
        # line's first is ever routed (the reference, which holds every such message, never leaves that)
        self.any_sent_on = False
        self.held_elsewhere_mostly = Reading(HELD_ELSEWHERE_MOSTLY, HELD_AT_ITS_ORIGIN, SENT_ON)
        self._retry_at = 0  # where in its line the wait being retried stood: waiting again, it stands there again
        # the waits routed again by their time-out at this instant, by instant: a notification at the same instant
        # may come before them (TIME_OUT_AND_NOTIFICATION)
        self.timed_out: tuple[int, list[Waiting]] = (-1, [])
        self._retrying: Envelope | None = None
        # the wait being retried, and the message's hops then: a message that waits again where it waited keeps
        # the instant it was received
        self._retried: tuple[Waiting, int] | None = None
        # the last message routed and sent on past the one ahead of it, now waiting at another instance
        # (``_left_behind``): where it arrives it may wait behind that one (Routing._retried_here)
        self._sent_past: Waiting | None = None

    def next_order(self) -> int:
        """The order number of a route change (Transmitter.route_changed): counted with the waits."""
        self._order += 1
        return self._order

    def submit(self, env: Envelope, origin: Instance, home: str) -> None:
        """A message SENT at its origin: it queues behind any earlier message of its conversation here, and behind
        one waiting at another instance as HELD_ELSEWHERE reads it."""
        line = self.lines.get((env.dialog, env.from_target))
        if not line:
            self.routing.route(env, origin, inside=True, home=home)
            return
        # held here: behind one in this instance's transmission queue, not one handled here as from outside (RTX-2)
        here = any(w.place == (origin.name, True) for w in line)
        if here or not self._sends_on(env, origin.name):
            self._wait(env, origin, True, home, BEHIND)
            return
        self.routing.route(env, origin, inside=True, home=home)

    def _sends_on(self, env: Envelope, instance: str) -> bool:
        """HELD_ELSEWHERE, asked of ENV at INSTANCE now: is it routed and sent on past the earlier message of its
        conversation that waits at another place only, rather than held here for it?"""
        self._about(env, instance, HELD_ELSEWHERE)  # the reading, asked first here, is read as this message shows
        mostly = self.held_elsewhere_mostly.of(self.chooser)
        other = SENT_ON if mostly == HELD_AT_ITS_ORIGIN else HELD_AT_ITS_ORIGIN
        if self.chooser.choose(HELD_ELSEWHERE, [mostly, other]) != SENT_ON:
            return False
        self.any_sent_on = True
        return True

    def _sent_on(self) -> bool:
        """Has any message been sent on past one held elsewhere, so that a line may wait at several places?"""
        return self.any_sent_on

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
        if not self._sends_on(held.envelope, held.instance):
            return None
        self._sent_past = held
        return held

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
            Kind.TRANSMISSION_PENDING,
            at,
            env,
            {"status": status if address is None else f"{status} to {address}", "address": address},
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
            self.transmission.awaiting_principal.pop(waiting.order, None)
            env, place = waiting.envelope, self.instances[waiting.instance]
            self._emit(Kind.ROUTING_RETRIED, place, env, {})
            self._retrying, self._retried, self._retry_at = env, (waiting, env.hops), at
            try:
                if pair_of is not None:
                    self.transmission._mirrored(env, place, pair_of, waiting.inside, waiting.home)
                else:
                    self.routing.route(
                        env, place, inside=waiting.inside, home=waiting.home, via_transport=not waiting.inside
                    )
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
