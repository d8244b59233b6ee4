"""Statements sessions and administrators run against queues: transactions, RECEIVE, ALTER QUEUE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sbtck.contract import QueueRef
from sbtck.engine.activation import ALTER, QueueMonitors
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.events import EventLog
from sbtck.engine.model import Conversation, Message, Queue, ReaderBehaviour
from sbtck.engine.receiving import GET_CONVERSATION_GROUP, RECEIVE, Receiving, Session
from sbtck.errors import BrokerError


class _Broker(Protocol):
    """What the statements need of the Broker they are part of."""

    clock: Clockwork
    log: EventLog
    receiving: Receiving
    monitors: QueueMonitors

    def advance(self, at_ms: int) -> None: ...
    def queue(self, key: QueueRef) -> Queue: ...
    def session(self, name: str) -> Session: ...
    def _procedure(self, key: QueueRef, name: str) -> ReaderBehaviour: ...
    def _conversation(self, dialog: str) -> Conversation: ...
    def _statement(self, at_ms: int, run: Callable[[], None]) -> None: ...


class QueueStatements:
    """A part of the Broker (mypy's self-type mixin): its methods see the Broker as ``_Broker``."""

    def begin_transaction(self: _Broker, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.begin(self.session(session)))

    def commit(self: _Broker, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.commit(self.session(session)))

    def rollback(self: _Broker, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.rollback(self.session(session)))

    def receive(
        self: _Broker,
        at_ms: int,
        session: str,
        key: QueueRef,
        *,
        top: int | None = None,
        where_dialog: str | None = None,
        where_group: str | None = None,
        waitfor_ms: int | None = None,
        get_conversation_group: bool = False,
    ) -> dict[str, Any]:
        self.advance(at_ms)
        self.queue(key)
        if where_dialog is not None:
            self._conversation(where_dialog)
        outcome: dict[str, Any] = {"status": "waiting"}

        def answered(rows: list[Message], group: str | None) -> None:
            outcome.update(
                status="empty" if group is None else "rows", rows=[m.row() for m in rows], conversation_group=group
            )

        statement = GET_CONVERSATION_GROUP if get_conversation_group else RECEIVE
        self._statement(
            at_ms,
            lambda: self.receiving.receive(
                self.session(session),
                key,
                statement=statement,
                top=top,
                where_dialog=where_dialog,
                where_group=where_group,
                waitfor_ms=waitfor_ms,
                on_result=answered,
            ),
        )
        return outcome

    def alter_queue(
        self: _Broker,
        at_ms: int,
        key: QueueRef,
        *,
        status: bool | None = None,
        procedure_name: str | None = None,
        max_queue_readers: int | None = None,
    ) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        activation = queue.activation
        if procedure_name is not None:
            self._procedure(key, procedure_name)
        if max_queue_readers is not None and max_queue_readers < 0:
            raise BrokerError(f"MAX_QUEUE_READERS must be 0 or more, not {max_queue_readers}")
        if (status if status is not None else activation.status) and not (procedure_name or activation.procedure_name):
            raise BrokerError(f"ALTER QUEUE {key.queue}: activation STATUS = ON needs a PROCEDURE_NAME")
        if status is not None:
            activation.status = status
        if procedure_name is not None:
            activation.procedure_name = procedure_name
        if max_queue_readers is not None:
            activation.max_queue_readers = max_queue_readers
        self.log.emit(at_ms, "queue_altered", **key.fields())
        self.monitors.sync(queue)
        self.monitors.evaluate(queue, ALTER)
        self.clock.run_pending()

    def create_event_notification(self: _Broker, at_ms: int, name: str, key: QueueRef) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        if name in queue.notifications:
            raise BrokerError(f"event notification {name!r} already exists on queue {key.queue!r}")
        queue.notifications.append(name)
        self.monitors.sync(queue)

    def drop_event_notification(self: _Broker, at_ms: int, name: str, key: QueueRef) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        if name not in queue.notifications:
            raise BrokerError(f"no event notification {name!r} on queue {key.queue!r}")
        queue.notifications.remove(name)
        self.monitors.sync(queue)

    def exit_procedure(self: _Broker, at_ms: int, key: QueueRef, task: int) -> None:
        self.advance(at_ms)
        found = self.monitors.find_task(self.queue(key).key, task)
        if found is None:
            raise BrokerError(f"activated task {task} of queue {key.queue!r} is not running")
        self.monitors.exit_procedure(found, "exited")
        self.clock.run_pending()
