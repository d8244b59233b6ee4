"""A session's transaction and the conversation group locks it holds: which group a reader may take, and when.

A session's open transaction holds each conversation group it received
from until it ends, so a second reader of a locked group waits (ACT-09);
which of several ready groups a reader takes the documents leave open
(GROUP). A rollback puts the messages the transaction received back in
their queues, and is a look for the monitor of each queue its RECEIVEs read,
rows or none (ACT-05). Who of the waiting sessions is served once a lock is
released is the readers' (``receiving.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbtck.contract import QueueRef
from sbtck.engine.choosing import GROUP
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Message
from sbtck.errors import ReceivingError
from sbtck.observations import Kind


@dataclass
class Session:
    name: str
    spid: int
    in_transaction: bool = False
    locks: set[tuple[QueueRef, str]] = field(default_factory=set)
    received: list[tuple[QueueRef, Message]] = field(default_factory=list)
    wait: Wait | None = None
    # the queues its open transaction RECEIVEd from, rows or none: its rollback is a check of each (ACT-05)
    read: dict[QueueRef, None] = field(default_factory=dict)


def _no_deadline() -> None:
    """A wait with no WAITFOR has no deadline to cancel."""


@dataclass(init=False)
class Wait:
    session: Session
    queue: QueueRef
    statement: str
    top: int | None
    where_dialog: str | None
    where_group: str | None
    on_result: Callable[[list[Message], str | None], None]
    cancel_deadline: Callable[[], None] = _no_deadline
    # the rows (as a session sees them) and the conversation group the statement returned, once it has
    result: tuple[list[dict[str, Any]], str | None] | None = None

    def __init__(
        self,
        session: Session,
        queue: QueueRef,
        statement: str,
        top: int | None,
        where_dialog: str | None,
        where_group: str | None,
        on_result: Callable[[list[Message], str | None], None],
        cancel_deadline: Callable[[], None] = _no_deadline,
        result: tuple[list[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self.session, self.queue, self.statement, self.top = session, queue, statement, top
        self.where_dialog, self.where_group = where_dialog, where_group
        self.on_result, self.cancel_deadline, self.result = on_result, cancel_deadline, result

    @property
    def has_where(self) -> bool:
        return self.where_dialog is not None or self.where_group is not None


@mypyc_attr(allow_interpreted_subclasses=True)
class Transactions:
    """Each session's open transaction, the conversation group locks it holds until it ends, and the group a
    reader may take."""

    def __init__(self, ctx: Context) -> None:
        self.queues = ctx.queues
        self.clock = ctx.clock
        self.log = ctx.log
        self.chooser = ctx.chooser
        self.locks: dict[tuple[QueueRef, str], Session] = {}
        self.takes_the_oldest = True

    def begin(self, session: Session) -> None:
        if session.in_transaction:
            raise ReceivingError(f"session {session.name!r} already has an open transaction")
        session.in_transaction = True

    def commit(self, session: Session) -> list[QueueRef]:
        """Ends the transaction: the queues whose groups it held."""
        self._require_transaction(session, "COMMIT")
        touched = self._end_transaction(session)
        self.log.add({"session": session.name, "at_ms": self.clock.now_ms, "kind": Kind.TRANSACTION_COMMITTED})
        return touched

    def rollback(self, session: Session) -> tuple[list[QueueRef], list[QueueRef]]:
        """Ends the transaction, what it received back in its queues: the queues whose groups it held, and those
        its rollback is a check of (ACT-05), where messages came back first."""
        self._require_transaction(session, "ROLLBACK")
        returned = list(session.received)
        # "a transaction that contains a RECEIVE statement rolls back": one that returned nothing too
        read = list(session.read)
        touched = self._end_transaction(session)
        for key, message in returned:
            queue = self.queues[key]
            queue.messages.append(message)
            queue.messages.sort(key=lambda m: m.queuing_order)
        self.log.add(
            {
                "session": session.name,
                "returned": len(returned),
                "at_ms": self.clock.now_ms,
                "kind": Kind.TRANSACTION_ROLLED_BACK,
            }
        )
        return touched, list(dict.fromkeys([*(key for key, _ in returned), *read]))

    def lock(self, wait: Wait, group: str, rows: list[Message]) -> None:
        """ACT-09: the group WAIT's statement returned is its session's until its transaction ends, and so are the
        rows, which a rollback returns."""
        session = wait.session
        if session.in_transaction:
            self.locks[(wait.queue, group)] = session
            session.locks.add((wait.queue, group))
            session.received.extend((wait.queue, m) for m in rows)

    def matches(self, wait: Wait, message: Message) -> bool:
        if wait.where_dialog is not None and message.dialog != wait.where_dialog:
            return False
        return wait.where_group is None or message.group == wait.where_group

    def could_take(self, wait: Wait) -> bool:
        """Whether some message would be returned to WAIT now: one it matches, of a group no other session holds."""
        for message in self.queues[wait.queue].messages:
            if self.matches(wait, message):
                owner = self.locks.get((wait.queue, message.group))
                if owner is None or owner is wait.session:
                    return True
        return False

    def pick_group(self, wait: Wait) -> str | None:
        """ACT-09: a group locked by another session is skipped, so a second reader of one conversation waits.

        With every message in one locked group the second reader stays in
        RECEIVE; that it keeps waiting is what stops further activation (ACT-07).
        Which of several ready groups it takes the documents do not say: the
        chooser picks (GROUP), offered the oldest first.
        """
        ready: dict[str, list[str]] = {}
        for message in self.queues[wait.queue].messages:
            if message.group in ready:
                ready[message.group].append(message.dialog)
                continue
            if not self.matches(wait, message):
                continue
            owner = self.locks.get((wait.queue, message.group))
            if owner is None or owner is wait.session:
                if self.takes_the_oldest:  # the reference's own pick: the rest of the queue need not be read
                    return message.group
                ready[message.group] = [message.dialog]
        if len(ready) < 2:
            return next(iter(ready), None)
        groups = list(ready)
        self.chooser.about(wait.queue.instance, {"receive": wait.session.name, "at_ms": self.clock.now_ms})
        return self.chooser.choose(GROUP, groups, {g: tuple(dialogs) for g, dialogs in ready.items()})

    def _require_transaction(self, session: Session, statement: str) -> None:
        if not session.in_transaction:
            raise ReceivingError(f"{statement} in session {session.name!r}, which has no open transaction")

    def _end_transaction(self, session: Session) -> list[QueueRef]:
        touched = list(dict.fromkeys(key for key, _ in session.locks))
        for lock in session.locks:
            self.locks.pop(lock, None)
        session.locks.clear()
        session.received.clear()
        session.read.clear()
        session.in_transaction = False
        return touched
