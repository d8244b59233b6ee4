"""What the rooms of the Router (sbtck/engine/router.py) share: the context, one another, and how they report.

Each room is one concern of moving messages between services: the
transmission queue (``transmission_queue.py``), the transmitter
(``transmitter.py``), routing (``routing_attempt.py``), transmission and
mirrors (``transmission.py``) and forwarding (``forwarding.py``). A message
goes from one to the next and back (routed, transmitted, routed again where
it arrives; waiting, then routed again), so each room holds the others,
joined by the Router once all are built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Database, Envelope, Instance

if TYPE_CHECKING:  # the rooms call one another: each module names the others only for its types
    from sbtck.engine.forwarding import Forwarding
    from sbtck.engine.routing_attempt import Routing
    from sbtck.engine.transmission import Transmission
    from sbtck.engine.transmission_queue import TransmissionQueue
    from sbtck.engine.transmitter import Transmitter


class Arrivals(Protocol):
    """Where a routed message ends (the Broker): in the target queue at once, or, having come over the transport,
    through the receiving instance's message dispatcher, which buffers it and may drop it (PER-1C)."""

    # with resending, the messages that have arrived: a copy of one is not sent again
    arrived: set[tuple[str, bool, int]]

    def deliver(self, env: Envelope, at: Instance, db: Database) -> None: ...
    def dispatch(self, env: Envelope, at: Instance, db: Database) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class Room:
    """One room of the Router: what it keeps of the context, and the other rooms it hands a message to."""

    def __init__(self, ctx: Context) -> None:
        self.instances = ctx.instances
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.chooser = ctx.chooser
        # the other rooms, set by join: each is built before the others exist
        self.queue: TransmissionQueue
        self.transmitter: Transmitter
        self.routing: Routing
        self.transmission: Transmission
        self.forwarding: Forwarding

    def join(
        self,
        queue: TransmissionQueue,
        transmitter: Transmitter,
        routing: Routing,
        transmission: Transmission,
        forwarding: Forwarding,
    ) -> None:
        self.queue, self.transmitter, self.routing = queue, transmitter, routing
        self.transmission, self.forwarding = transmission, forwarding

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

    def _about(self, env: Envelope, instance: str, kind: str) -> None:
        """Tell the chooser that the next choice, of KIND, is about ENV at INSTANCE now (the search reads the
        implementation's pick from what that message did there then)."""
        about = env.fields()
        about["at_ms"], about[kind] = self.clock.now_ms, True
        self.chooser.about(instance, about)
