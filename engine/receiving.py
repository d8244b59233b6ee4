"""RECEIVE and GET CONVERSATION GROUP: who waits, who is served, and which group a reader gets.

A session's transaction, with the conversation group locks it holds and
what its rollback returns, is a room of its own (``transactions.py``),
which Receiving builds from its ``ClassVar``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from sbtck.contract import QueueRef
from sbtck.engine.choosing import A_RECEIVE, GCG_READING, NOT_A_RECEIVE, WAITER
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Message, Queue
from sbtck.engine.transactions import Session, Transactions, Wait
from sbtck.errors import ReceivingError
from sbtck.observations import Kind

RECEIVE = "RECEIVE"
GET_CONVERSATION_GROUP = "GET CONVERSATION GROUP"


Result = Callable[[list[Message], str | None], None]


@mypyc_attr(allow_interpreted_subclasses=True)
class ReceiveActivity:
    """What Receiving tells a queue's monitor of the readers (the queue monitors, sbtck/engine/activation.py), so
    that it can decide on activation. Declared here, where it is called, as a class rather than a protocol
    (sbtck/engine/compiling.py says why)."""

    def receive_called(self, queue: Queue) -> None:
        raise NotImplementedError

    def receive_waiting(self, queue: Queue) -> None:
        raise NotImplementedError

    def receive_finished(self, queue: Queue, *, empty: bool, has_where: bool) -> None:
        raise NotImplementedError

    def group_got(self, queue: Queue, *, empty: bool) -> None:
        raise NotImplementedError

    def rolled_back(self, queue: Queue, after_the_reader: bool = False) -> None:
        raise NotImplementedError

    def looks_at_once(self, key: QueueRef, readers_wait: bool) -> bool:
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)
class Receiving:
    """Hands messages to readers, one reader per conversation group at a time."""

    transactions_class: ClassVar[type[Transactions]] = Transactions

    def __init__(self, ctx: Context, watcher: ReceiveActivity) -> None:
        self.queues = ctx.queues
        self.clock = ctx.clock
        self.log = ctx.log
        self.watcher = watcher
        self.transactions = self.transactions_class(ctx)
        self.waits: dict[QueueRef, list[Wait]] = {key: [] for key in ctx.queues}
        self.chooser = ctx.chooser
        self.group_reading: str | None = None  # GCG_READING, asked at the first GET CONVERSATION GROUP

    # ------------------------------------------------------------ statements
    def receive(
        self,
        session: Session,
        key: QueueRef,
        *,
        statement: str = RECEIVE,
        top: int | None = None,
        where_dialog: str | None = None,
        where_group: str | None = None,
        waitfor_ms: int | None = None,
        on_result: Result = lambda rows, group: None,
    ) -> Wait:
        """The statement, returned: its ``result`` is set when it returned at once, else it waits."""
        if session.wait is not None:
            raise ReceivingError(f"session {session.name!r} is already waiting in {session.wait.statement}")
        queue = self.queues[key]
        wait = Wait(session, key, statement, top, where_dialog, where_group, on_result)
        if self._a_receive(statement):
            self.watcher.receive_called(queue)
            if session.in_transaction:
                session.read[key] = None
        if self._try_serve(wait):
            return wait
        if not waitfor_ms:
            self._finish(wait, [], None)
            return wait
        session.wait = wait
        self.waits[key].append(wait)
        due = self.clock.at(self.clock.now_ms + waitfor_ms, lambda: self._time_out(wait))
        wait.cancel_deadline = lambda: setattr(due, "cancelled", True)
        self.log.add(
            {
                "session": session.name,
                "statement": statement,
                "has_where": wait.has_where,
                **key.fields(),
                "at_ms": self.clock.now_ms,
                "kind": Kind.READER_WAITING,
            }
        )
        if self._a_receive(statement):
            self.watcher.receive_waiting(queue)
        return wait

    def _a_receive(self, statement: str) -> bool:
        """Whether the statement counts as a RECEIVE for the queue monitor (GCG_READING)."""
        if statement == RECEIVE:
            return True
        if self.group_reading is None:
            self.group_reading = self.chooser.choose(GCG_READING, [A_RECEIVE, NOT_A_RECEIVE])
        return self.group_reading == A_RECEIVE

    def tasks_waiting(self, key: QueueRef) -> int:
        """Sessions waiting in GET CONVERSATION GROUP or a RECEIVE without WHERE (ACT-07)."""
        return sum(1 for wait in self.waits[key] if not wait.has_where)

    def cancel_wait(self, session: Session) -> None:
        wait = session.wait
        if wait is not None:
            wait.cancel_deadline()
            self.waits[wait.queue].remove(wait)
            session.wait = None

    # ---------------------------------------------------------- transactions
    def begin(self, session: Session) -> None:
        self.transactions.begin(session)

    def commit(self, session: Session, *, serve: bool = True) -> list[QueueRef]:
        """Ends the transaction and, unless told not to, serves the readers waiting on the queues it touched."""
        touched = self.transactions.commit(session)
        for key in touched if serve else ():
            self.serve(key)
        return touched

    def rollback(self, session: Session) -> None:
        touched, back = self.transactions.rollback(session)
        # a monitor that looks at the trigger looks before a waiting reader takes what came back, as at an arrival
        # (or after it, where the run lets the reader go first: ARRIVAL_LOOK)
        first = [key for key in back if self.watcher.looks_at_once(key, bool(self.waits[key]))]
        for key in first:
            self.watcher.rolled_back(self.queues[key])
        for key in touched:
            self.serve(key)
        for key in back:
            if key not in first:
                self.watcher.rolled_back(self.queues[key], after_the_reader=True)

    # ----------------------------------------------------------------- queue
    def serve(self, key: QueueRef) -> None:
        """Give waiting readers what has become available.

        Which of several waiting sessions able to take something is served
        first the documents do not say: the chooser picks (WAITER), offered
        them in the order they began to wait. Serving one only takes messages
        and locks groups, so a session that could take nothing still cannot.
        """
        left = list(self.waits[key])
        while left:
            # one session left: no choice to make, and serving it finds out whether it can take anything
            ready = (
                left
                if len(left) == 1
                else [w for w in left if w in self.waits[key] and self.transactions.could_take(w)]
            )
            if not ready:
                return
            wait = ready[0]
            if wait not in self.waits[key]:
                return
            if len(ready) > 1:
                self.chooser.about(key.instance, {"waiter": "/".join(key), "at_ms": self.clock.now_ms})
                picked = self.chooser.choose(WAITER, [w.session.name for w in ready])
                wait = next(w for w in ready if w.session.name == picked)
            left.remove(wait)
            if self._try_serve(wait):  # a chooser following another run counts who was served (differential.py)
                self.chooser.about(
                    key.instance, {"served": wait.session.name, "queue": "/".join(key), "at_ms": self.clock.now_ms}
                )

    # -------------------------------------------------------------- internal
    def _try_serve(self, wait: Wait) -> bool:
        group = self.transactions.pick_group(wait)
        if group is None:
            return False
        rows: list[Message] = []
        if wait.statement == RECEIVE:
            queue = self.queues[wait.queue]
            # one pass over the queue, ending at the TOP-th row: the rest of a long queue is kept as it stands
            kept: list[Message] = []
            top = wait.top
            messages = queue.messages
            for i, m in enumerate(messages):
                if top is not None and len(rows) >= top:
                    kept.extend(messages[i:])
                    break
                if m.group == group and self.transactions.matches(wait, m):
                    rows.append(m)
                else:
                    kept.append(m)
            queue.messages = kept
        self.transactions.lock(wait, group, rows)
        self._finish(wait, rows, group)
        return True

    def _time_out(self, wait: Wait) -> None:
        if wait.session.wait is wait:
            self._finish(wait, [], None)

    def _finish(self, wait: Wait, rows: list[Message], group: str | None) -> None:
        if wait.session.wait is wait:
            self.cancel_wait(wait.session)
        empty = group is None
        key = wait.queue
        has_where = wait.has_where
        # the rows as the session sees them, made once: the event says them, and so does the statement's answer
        returned = [m.row() for m in rows]
        kind = Kind.EMPTY_RESULT if empty else Kind.ROWS_RETURNED
        if wait.statement == RECEIVE:
            self.log.add(
                {
                    "session": wait.session.name,
                    "statement": RECEIVE,
                    "has_where": has_where,
                    "rows": returned,
                    "instance": key.instance,
                    "database": key.database,
                    "queue": key.queue,
                    "at_ms": self.clock.now_ms,
                    "kind": kind,
                }
            )
        else:
            self.log.add(
                {
                    "session": wait.session.name,
                    "statement": wait.statement,
                    "has_where": has_where,
                    "conversation_group": group,
                    "instance": key.instance,
                    "database": key.database,
                    "queue": key.queue,
                    "at_ms": self.clock.now_ms,
                    "kind": kind,
                }
            )
        if self._a_receive(wait.statement):
            self.watcher.receive_finished(self.queues[key], empty=empty, has_where=has_where)
        else:
            self.watcher.group_got(self.queues[key], empty=empty)
        wait.result = (returned, group)
        wait.on_result(rows, group)
