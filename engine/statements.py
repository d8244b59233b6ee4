"""Statements sessions and administrators run against queues: transactions, RECEIVE, ALTER QUEUE."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from sbtck.contract import QueueRef
from sbtck.engine.activation import QueueMonitors
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.compiling import mypyc_attr, trait
from sbtck.engine.context import command
from sbtck.engine.events import EventLog
from sbtck.engine.model import Conversation, Queue, ReaderBehaviour
from sbtck.engine.receiving import GET_CONVERSATION_GROUP, RECEIVE, Receiving
from sbtck.engine.transactions import Session
from sbtck.errors import BrokerError
from sbtck.observations import Kind, Trigger


class _Broker(Protocol):
    """What the statements need of the Broker they are part of."""

    clock: Clockwork
    log: EventLog
    receiving: Receiving
    monitors: QueueMonitors

    def advance(self, at_ms: int) -> None: ...
    def queue(self, key: QueueRef) -> Queue: ...
    def session(self, name: str) -> Session: ...
    def procedure(self, key: QueueRef, name: str) -> ReaderBehaviour: ...
    def conversation(self, dialog: str) -> Conversation: ...
    def receive(
        self,
        at_ms: int,
        /,
        session: str,
        queue: QueueRef,
        *,
        top: int | None = None,
        where_dialog: str | None = None,
        where_group: str | None = None,
        waitfor_ms: int | None = None,
        get_conversation_group: bool = False,
    ) -> dict[str, Any]: ...


T = TypeVar("T")


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class QueueStatements:
    """A part of the Broker (mypy's self-type mixin): its methods see the Broker as ``_Broker``.

    Every method is a ``command``: called with the time first, applied as ``command`` says.
    """

    @command
    def begin_transaction(self: _Broker, session: str) -> None:
        self.receiving.begin(self.session(session))

    @command
    def commit(self: _Broker, session: str) -> None:
        self.receiving.commit(self.session(session))

    @command
    def rollback(self: _Broker, session: str) -> None:
        self.receiving.rollback(self.session(session))

    # a command (context.command) written out, as SEND is (sbtck/engine/compiling.py)
    def receive(
        self: _Broker,
        at_ms: int,
        /,
        session: str,
        queue: QueueRef,
        *,
        top: int | None = None,
        where_dialog: str | None = None,
        where_group: str | None = None,
        waitfor_ms: int | None = None,
        get_conversation_group: bool = False,
    ) -> dict[str, Any]:
        """RECEIVE or GET CONVERSATION GROUP; a result that waits says so and is never filled in later.

        A waiting statement's rows come with the event that ends its wait
        (``rows_returned`` or ``empty_result``), as a real session sees them
        when its statement returns; the answer given now is final.
        """
        self.advance(at_ms)
        key = self.queue(queue).key  # the engine's own: its tables then find it by identity, without comparing names
        if where_dialog is not None:
            self.conversation(where_dialog)
        wait = self.receiving.receive(
            self.session(session),
            key,
            statement=GET_CONVERSATION_GROUP if get_conversation_group else RECEIVE,
            top=top,
            where_dialog=where_dialog,
            where_group=where_group,
            waitfor_ms=waitfor_ms,
        )
        # the answer as the statement returned, before what it set off at this instant runs
        answer: dict[str, Any] = {"status": "waiting"}
        if wait.result is not None:
            rows, group = wait.result
            status = "empty" if group is None else "rows"
            answer = {"status": status, "rows": list(rows), "conversation_group": group}
        self.clock.run_pending()
        return answer

    def get_conversation_group(
        self: _Broker, at_ms: int, /, session: str, queue: QueueRef, waitfor_ms: int | None = None
    ) -> dict[str, Any]:
        """GET CONVERSATION GROUP: RECEIVE's lock without its rows (Broker.receive)."""
        return self.receive(at_ms, session, queue, waitfor_ms=waitfor_ms, get_conversation_group=True)

    @command
    def alter_queue(
        self: _Broker,
        queue: QueueRef,
        *,
        status: str | None = None,
        procedure_name: str | None = None,
        max_queue_readers: int | None = None,
    ) -> None:
        """ALTER QUEUE ... WITH ACTIVATION: STATUS ON or OFF; what is left None stays as it is."""
        altered = self.queue(queue)
        activation = altered.activation
        if status not in (None, "ON", "OFF"):
            raise BrokerError(f"ALTER QUEUE {queue.queue}: STATUS is ON or OFF, not {status!r}")
        on = None if status is None else status == "ON"
        if procedure_name is not None:
            self.procedure(queue, procedure_name)
        if max_queue_readers is not None and max_queue_readers < 0:
            raise BrokerError(f"MAX_QUEUE_READERS must be 0 or more, not {max_queue_readers}")
        if (on if on is not None else activation.status) and not (procedure_name or activation.procedure_name):
            raise BrokerError(f"ALTER QUEUE {queue.queue}: activation STATUS = ON needs a PROCEDURE_NAME")
        if on is not None:
            activation.status = on
        if procedure_name is not None:
            activation.procedure_name = procedure_name
        if max_queue_readers is not None:
            activation.max_queue_readers = max_queue_readers
        self.log.add({**queue.fields(), "at_ms": self.clock.now_ms, "kind": Kind.QUEUE_ALTERED})
        self.monitors.sync(altered)
        self.monitors.evaluate(altered, Trigger.ALTER)

    @command
    def create_event_notification(self: _Broker, name: str, queue: QueueRef) -> None:
        notified = self.queue(queue)
        if name in notified.notifications:
            raise BrokerError(f"event notification {name!r} already exists on queue {queue.queue!r}")
        notified.notifications.append(name)
        self.monitors.sync(notified)

    @command
    def drop_event_notification(self: _Broker, name: str, queue: QueueRef) -> None:
        notified = self.queue(queue)
        if name not in notified.notifications:
            raise BrokerError(f"no event notification {name!r} on queue {queue.queue!r}")
        notified.notifications.remove(name)
        self.monitors.sync(notified)
        if not notified.notifications:
            self.monitors.notifications_dropped(notified)

    @command
    def exit_procedure(self: _Broker, queue: QueueRef, task: int) -> None:
        found = self.monitors.find_task(self.queue(queue).key, task)
        if found is None:
            raise BrokerError(f"activated task {task} of queue {queue.queue!r} is not running")
        self.monitors.exit_procedure(found, "exited")
