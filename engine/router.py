"""Moves messages between services: the Router, its rooms joined, and what the rest of the engine asks of it.

A message is routed where it is (``routing_attempt.py``): inside its origin
instance with the initiating database's sys.routes, on arrival from the
network with msdb.sys.routes (RTE-01). What cannot go yet waits, in order
per conversation (``transmission_queue.py``): in the transmission queue of
its origin, or - a message being forwarded - in the forwarder's memory only
(PER-5B, ``forwarding.py``). A delayed conversation is matched again after
``delayed_retry_s`` (RTM-8); a message waiting for a connection goes when
the transport opens one (PER-2A); the transmitter reclassifies dialogs on
every 2nd timer notification (PER-2B, ``transmitter.py``). A message that
goes leaves over the transport, or by a mirrored route's principal
(``transmission.py``).

Each room is a class a wrong variant or a plug-in may subclass; the Router
builds the one its ``ClassVar`` names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.forwarding import Forwarding
from sbtck.engine.model import Envelope, Instance
from sbtck.engine.room import Arrivals
from sbtck.engine.routing_attempt import Routing
from sbtck.engine.transmission import Transmission
from sbtck.engine.transmission_queue import (
    BEHIND,
    CONNECTING,
    DELAYED,
    FAILED,
    NO_PRINCIPAL,
    TransmissionQueue,
    Waiting,
)
from sbtck.engine.transmitter import Transmitter
from sbtck.engine.transport import Transport

__all__ = [
    "BEHIND",
    "CONNECTING",
    "DELAYED",
    "FAILED",
    "NO_PRINCIPAL",
    "Arrivals",
    "Router",
    "SendsOnceConnected",
    "Waiting",
]


@mypyc_attr(allow_interpreted_subclasses=True)
class Router:
    queue_class: ClassVar[type[TransmissionQueue]] = TransmissionQueue
    transmitter_class: ClassVar[type[Transmitter]] = Transmitter
    routing_class: ClassVar[type[Routing]] = Routing
    transmission_class: ClassVar[type[Transmission]] = Transmission
    forwarding_class: ClassVar[type[Forwarding]] = Forwarding

    def __init__(self, ctx: Context, transport: Transport, arrivals: Arrivals) -> None:
        self.queue = self.queue_class(ctx)
        self.transmitter = self.transmitter_class(ctx, transport)
        self.routing = self.routing_class(ctx, arrivals)
        self.transmission = self.transmission_class(ctx, transport, arrivals)
        self.forwarding = self.forwarding_class(ctx)
        rooms = (self.queue, self.transmitter, self.routing, self.transmission, self.forwarding)
        for room in rooms:
            room.join(*rooms)
        # what the broker and the route and fault administration read: the rooms' own
        self.resend_first_ms = self.transmission.resend_first_ms
        self.lost = self.transmission.lost
        self.requests = self.routing.requests

    # what the rest of the engine asks: each in the room of its concern
    def submit(self, env: Envelope, origin: Instance, home: str) -> None:
        self.queue.submit(env, origin, home)

    def acknowledged(self, dialog: str, broker_instance: str) -> None:
        self.transmitter.acknowledged(dialog, broker_instance)

    def connect_and_send(self, only: str | None = None) -> None:
        self.transmitter.connect_and_send(only)

    def reclassify(self, instance: str) -> None:
        self.transmitter.reclassify(instance)

    def route_changed(self, instance: str, *services: str | None) -> None:
        self.transmitter.route_changed(instance, *services)

    def fail_dialog(self, dialog: str, reason: str, ends: Iterable[str] = ()) -> None:
        self.transmitter.fail_dialog(dialog, reason, ends)

    def forget_stale_forwarded(self, only: str | None = None) -> None:
        self.forwarding.forget_stale_forwarded(only)

    def by_address(self, address: str) -> Instance | None:
        return self.transmission.by_address(address)

    def transmission_rows(self, forwarded: bool = False) -> list[dict[str, object]]:
        return self.queue.transmission_rows(forwarded)


class SendsWhereRouted(Transmitter):
    """A message waiting for a connection goes on the address it was routed to, without being matched again.

    The documents leave open whether a message is matched again when its
    connection opens (``Transmitter.once_connected``): this is the other choice.
    """

    def once_connected(self, head: Waiting) -> None:
        queue = self.queue
        key = (head.envelope.dialog, head.envelope.from_target)
        line = queue.lines[key]
        at = next(i for i, w in enumerate(line) if w is head)
        line.pop(at)
        queue._retrying, queue._retry_at = head.envelope, at
        try:
            self.transmission._transmit(
                head.envelope, self.instances[head.instance], head.address, head.inside, head.home
            )
        finally:
            queue._retrying, queue._retry_at = None, 0
        if len(line) > at and line[at].envelope is not head.envelope and queue._follows(head, line[at]):
            queue._retry(line[at])  # the next in line follows at once
        elif len(line) > at and line[at].place != head.place:
            # it waits again at another instance: what it left held behind it here is held for it, or routed and
            # sent on (HELD_ELSEWHERE), as where a message matched again once connected goes on (TransmissionQueue)
            left = queue._left_behind(line, at + 1, head)
            if left is not None:
                queue._retry(left)
        elif not line:
            queue.lines.pop(key, None)


@mypyc_attr(allow_interpreted_subclasses=True)
class SendsOnceConnected(Router):
    """The Router whose transmitter sends a message waiting for its connection where it was routed."""

    transmitter_class = SendsWhereRouted
