"""The transport: connections to remote destinations, and when they may be tried.

A destination is suppressed for 15 seconds after a disconnection and for
60 seconds after each failed connection attempt; idle connections close on
every 5th timer notification once idle for 90 seconds (PER-2A, PER-5A).
The reference engine also tries to connect at once when a message is sent
to an unsuppressed destination: the documents are silent on that point.
"""

from __future__ import annotations

from dataclasses import dataclass

from sbtck.engine.choosing import (
    AT_NEXT_USE,
    AT_ONCE_NOTICED,
    BROKEN_NOTICED,
    IDLE_SPAN,
    SUPPRESSION_SPAN,
    Chooser,
    FirstChooser,
    Reading,
    Span,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Instance
from sbtck.observations import Kind

Link = tuple[str, str]  # (instance, destination address, upper case)


@dataclass
class Connection:
    opened_ms: int
    last_activity_ms: int


@mypyc_attr(allow_interpreted_subclasses=True)
class Transport:
    connect_on_send = True

    def __init__(self, ctx: Context) -> None:
        self.instances = ctx.instances
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.connections: dict[Link, Connection] = {}
        self.suppressed_until: dict[Link, int] = {}
        self.chooser: Chooser = FirstChooser()  # the broker's, once it has one
        self.noticed = Reading(BROKEN_NOTICED, AT_ONCE_NOTICED, AT_NEXT_USE)
        self.broken: set[Link] = set()  # AT_NEXT_USE: connections the network lost, not yet found broken
        self.suppression, self.idleness = Span(SUPPRESSION_SPAN), Span(IDLE_SPAN)

    def _emit(self, kind: str, link: Link, **fields: object) -> None:
        self.log.add({"instance": link[0], "address": link[1], **fields, "at_ms": self.clock.now_ms, "kind": kind})

    def _target(self, address: str) -> Instance | None:
        return next((i for i in self.instances.values() if i.address.upper() == address.upper()), None)

    def suppressed(self, link: Link) -> bool:
        return not self.suppression.over(self.clock.now_ms, self.suppressed_until.get(link, 0), self.chooser)

    def attempt(self, link: Link) -> bool:
        """One connection attempt; a refusal suppresses the destination for 60 seconds."""
        target = self._target(link[1])
        if target is not None and target.reachable:
            self.connections[link] = Connection(self.clock.now_ms, self.clock.now_ms)
            self._emit(Kind.CONNECTION_ATTEMPT, link, result="connected")
            return True
        self.suppressed_until[link] = self.clock.now_ms + int(self.params.suppress_after_failed_connect_s * 1000)
        self._emit(Kind.CONNECTION_ATTEMPT, link, result="refused")
        return False

    def ready(self, instance: str, address: str) -> bool:
        """Is there a connection to send on now, opening one if the engine may?"""
        link = (instance, address.upper())
        if self.broken:  # a test of an empty set on every send, not a call: the lost links are rare
            self._notice(link)
        if link in self.connections:
            return True
        if self.connect_on_send and not self.suppressed(link):
            return self.attempt(link)
        return False

    def used(self, instance: str, address: str) -> None:
        self.connections[(instance, address.upper())].last_activity_ms = self.clock.now_ms

    def disconnect(self, link: Link, reason: str) -> None:
        if self.connections.pop(link, None) is not None:
            self.suppressed_until[link] = self.clock.now_ms + int(self.params.suppress_after_disconnect_s * 1000)
            self._emit(Kind.CONNECTION_CLOSED, link, reason=reason)

    def drop_links_to(self, address: str) -> None:
        """The network lost the instance at ADDRESS: its connections are broken, found so now or at next use."""
        lost = [link for link in self.connections if link[1] == address.upper()]
        if lost and self.noticed.of(self.chooser) == AT_NEXT_USE:
            self.broken.update(lost)
            return
        for link in lost:
            self.disconnect(link, "disconnected")

    def _notice(self, link: Link) -> None:
        if link in self.broken:
            self.broken.discard(link)
            self.disconnect(link, "disconnected")

    def connect_pending(self, wanted: list[Link]) -> list[Link]:
        """PER-2A: try each destination with pending messages that is not suppressed; return the open ones."""
        opened = []
        for link in dict.fromkeys(wanted):
            if self.broken:
                self._notice(link)
            if link in self.connections or (not self.suppressed(link) and self.attempt(link)):
                opened.append(link)
        return opened

    def close_idle(self, only: str | None = None) -> None:
        """PER-5A: connections idle for the past 90 seconds close (of the instance ONLY names, if it names one)."""
        limit = int(self.params.connection_idle_close_s * 1000)
        for link, conn in list(self.connections.items()):
            if only not in (None, link[0]):
                continue
            if self.idleness.over(self.clock.now_ms, conn.last_activity_ms + limit, self.chooser):
                del self.connections[link]
                self._emit(Kind.CONNECTION_CLOSED, link, reason="idle")
        if self.broken:
            self.broken &= set(self.connections)

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "instance": link[0],
                "address": link[1],
                "state": "CONNECTED",
                "opened_ms": conn.opened_ms,
                "last_activity_ms": conn.last_activity_ms,
            }
            for link, conn in sorted(self.connections.items())
        ]


class NotifiedTransport(Transport):
    """PER-2A read literally: the transport connects when notified, not when a message is sent. An allowed choice."""

    connect_on_send = False
