"""Forwarding: a message from outside, routed on by this instance (RTC-5, RTX-1, PER-5B).

A message that came over the network leaves again only while forwarding is
active (RTC-5), and only so many times (RTX-1); the forwarder holds it in
memory, never in a queue, and deletes it if it is not forwarded within 60
seconds of its receipt (PER-5B).
"""

from __future__ import annotations

from sbtck.engine.choosing import (
    ARRIVES_BEHIND,
    BEHIND_A_DELETED,
    FOLLOWS_AT_ONCE,
    FORWARD_REPORTED,
    FORWARD_SPAN,
    MATCHED_ON_ITS_OWN,
    STAYS_BEHIND,
    WAITS_BEHIND_IT,
    WHEN_DECIDED,
    WHEN_SENT_ON,
    Reading,
    Span,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Envelope, Instance
from sbtck.engine.room import Room
from sbtck.engine.transmission_queue import BEHIND, Waiting
from sbtck.observations import Kind


@mypyc_attr(allow_interpreted_subclasses=True)
class Forwarding(Room):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.span = Span(FORWARD_SPAN)  # PER-5B's 60 seconds: whether the last instant counts is a choice
        self.forward_reported = Reading(FORWARD_REPORTED, WHEN_SENT_ON, WHEN_DECIDED)
        # the messages, by place, whose forward was reported when decided and is not done yet
        self.reported_forwards: set[tuple[str, bool, int, str]] = set()

    def may_leave(self, at: Instance, inside: bool) -> bool:
        """RTC-5: a message from outside leaves by a non-LOCAL route only while forwarding is active."""
        return inside or at.forwarding

    def hop_limit_reached(self, env: Envelope) -> bool:
        """RTX-1: forwarding counts, so a loop cannot forward a message for ever."""
        return env.hops + 1 > self.params.forward_hop_limit

    def _arrives_behind(self, env: Envelope, at: Instance) -> bool:
        """ARRIVES_BEHIND: where an earlier message of its conversation waits here (one sent on past an instance
        that held it, or overtaken), the conversation is delayed or waits here: the message waits behind it, or
        is matched on its own."""
        line = self.queue.lines.get((env.dialog, env.from_target), ())
        if not any(w.instance == at.name for w in line):
            return False
        self._about(env, at.name, ARRIVES_BEHIND)
        return self.chooser.choose(ARRIVES_BEHIND, [WAITS_BEHIND_IT, MATCHED_ON_ITS_OWN]) == WAITS_BEHIND_IT

    def forget_stale_forwarded(self, only: str | None = None) -> None:
        """PER-5B: a message not forwarded within 60 seconds of receipt is deleted (by the instance ONLY names, if
        it names one)."""
        limit = int(self.params.forward_stale_s * 1000)
        gone_from: list[list[Waiting]] = []
        for key, line in list(self.queue.lines.items()):
            for waiting in [
                w
                for w in line
                if not w.inside
                and only in (None, w.instance)
                and self.span.over(self.clock.now_ms, w.received_ms + limit, self.chooser)
            ]:
                line.remove(waiting)
                gone_from.append(line)
                env = waiting.envelope
                self.reported_forwards.discard((env.dialog, env.from_target, env.sequence, waiting.instance))
                self._emit(Kind.FORWARDED_MESSAGE_DELETED, self.instances[waiting.instance], waiting.envelope, {})
            if not line:
                del self.queue.lines[key]
        # BEHIND_A_DELETED: what waited behind a deleted message follows it as it would had it gone on, or stays
        behind = {id(w): w for line in gone_from for w in self.queue._firsts(line) if w.status == BEHIND}
        for held in behind.values():
            self._about(held.envelope, held.instance, BEHIND_A_DELETED)
            if self.chooser.choose(BEHIND_A_DELETED, [STAYS_BEHIND, FOLLOWS_AT_ONCE]) == FOLLOWS_AT_ONCE:
                self.queue._retry(held)
