"""Dialogs: BEGIN DIALOG, SEND, a message's arrival in its queue and the acknowledgement (RTE-04)."""

from __future__ import annotations

from collections.abc import Callable

from sbtck.engine.activation import QueueMonitors
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Conversation, Database, Endpoint, Envelope, Instance, Message
from sbtck.engine.receiving import Receiving
from sbtck.engine.router import Router
from sbtck.errors import BrokerError
from sbtck.observations import Kind, Trigger


@mypyc_attr(allow_interpreted_subclasses=True)
class Dialogs:
    """The conversations a broker's services hold: their endpoints, their messages' sequence numbers, and where each
    message goes in (the router carries it between them). The Broker's commands hand their work here."""

    def __init__(
        self,
        ctx: Context,
        conversations: dict[str, Conversation],
        router: Router,
        monitors: QueueMonitors,
        receiving: Receiving,
        database: Callable[[str, str], Database],
    ) -> None:
        self.instances = ctx.instances
        self.queues = ctx.queues
        self.clock = ctx.clock
        self.log = ctx.log
        self.router = router
        self.monitors = monitors
        self.receiving = receiving
        # the broker's lookup, which names what is missing
        self.database = database
        self.conversations = conversations
        self._queuing_order = 0

    def conversation(self, dialog: str) -> Conversation:
        try:
            return self.conversations[dialog]
        except KeyError:
            raise BrokerError(f"no dialog {dialog!r} has been begun") from None

    def begin(self, dialog: str, initiator: tuple[str, str, str], to_service: str, to_broker: str | None) -> None:
        """BEGIN DIALOG only creates the initiator's endpoint; routing starts with the first SEND."""
        if dialog in self.conversations:
            raise BrokerError(f"dialog {dialog!r} has already been begun")
        instance, database, from_service = initiator
        db = self.database(instance, database)
        if from_service not in db.services:
            raise BrokerError(f"no service {from_service!r} in database {database!r} of instance {instance!r}")
        endpoint = Endpoint(instance, database, from_service, db.broker_instance)
        broker = to_broker.upper() if to_broker else None
        self.conversations[dialog] = Conversation(dialog, endpoint, to_service, target_broker_instance=broker)
        self.log.add(
            {
                "dialog": dialog,
                "instance": instance,
                "database": database,
                "from_service": from_service,
                "to_service": to_service,
                "to_broker_instance": broker,
                "at_ms": self.clock.now_ms,
                "kind": Kind.DIALOG_BEGUN,
            }
        )

    def send(self, dialog: str, message_type: str, body: str, from_target: bool) -> int:
        """SEND by the initiator, or by the target when ``from_target`` (a reply): the message's sequence number."""
        conv = self.conversation(dialog)
        if from_target:
            if conv.target is None:
                raise BrokerError(f"dialog {dialog!r} has not reached a target yet, so the target cannot reply")
            sequence, conv.reply_sequence = conv.reply_sequence, conv.reply_sequence + 1
            env = Envelope(
                dialog,
                sequence,
                conv.initiator.service,
                conv.initiator.broker_instance,
                True,
                message_type,
                body,
            )
            origin, home = self.instances[conv.target.instance], conv.target.database
        else:
            sequence, conv.next_sequence = conv.next_sequence, conv.next_sequence + 1
            env = Envelope(
                dialog,
                sequence,
                conv.target_service,
                conv.target_broker_instance,
                False,
                message_type,
                body,
            )
            origin, home = self.instances[conv.initiator.instance], conv.initiator.database
        self.log.add(
            {
                "instance": origin.name,
                "database": home,
                "dialog": env.dialog,
                "message_sequence_number": env.sequence,
                "from_target": env.from_target,
                "at_ms": self.clock.now_ms,
                "kind": Kind.MESSAGE_SENT,
            }
        )
        self.router.submit(env, origin, home)
        return sequence

    def deliver(self, env: Envelope, at: Instance, db: Database) -> None:
        conv = self.conversations[env.dialog]
        service = db.services[env.to_service]
        if not env.from_target and conv.target is None:
            conv.target = Endpoint(at.name, db.name, service.name, db.broker_instance)
        queue = self.queues[service.queue]
        conv.received[int(env.from_target)] = env.sequence + 1
        self._queuing_order += 1
        message = Message(
            self._queuing_order, env.dialog, env.dialog, env.sequence, env.message_type, env.body, self.clock.now_ms
        )
        arrived_on_empty = queue.unread() == 0
        queue.messages.append(message)
        key = queue.key
        self.log.add(
            {
                "dialog": env.dialog,
                "message_sequence_number": env.sequence,
                "from_target": env.from_target,
                "service": service.name,
                "conversation_group": message.group,
                "instance": key.instance,
                "database": key.database,
                "queue": key.queue,
                "at_ms": self.clock.now_ms,
                "kind": Kind.MESSAGE_ARRIVED,
            }
        )
        if not env.from_target and not conv.acknowledged:
            self.acknowledge(conv, db)
        # the arrival is the trigger: looked at before a waiting reader takes the message, or after (ARRIVAL_LOOK)
        if self.monitors.looks_at_once(queue.key, bool(self.receiving.waits[queue.key])):
            self.monitors.evaluate(queue, Trigger.ARRIVAL, arrived_on_empty)
            self.receiving.serve(queue.key)
        else:
            self.receiving.serve(queue.key)
            self.monitors.evaluate_after_the_reader(queue, Trigger.ARRIVAL, arrived_on_empty)

    def acknowledge(self, conv: Conversation, db: Database) -> None:
        """RTE-04: the acknowledgement names the target's broker instance; later messages carry it."""
        conv.acknowledged = True
        conv.target_broker_instance = db.broker_instance
        self.router.acknowledged(conv.dialog, db.broker_instance)
        self.log.add(
            {
                "instance": conv.initiator.instance,
                "dialog": conv.dialog,
                "broker_instance": db.broker_instance,
                "at_ms": self.clock.now_ms,
                "kind": Kind.ACKNOWLEDGED,
            }
        )
