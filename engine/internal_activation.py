"""Internal activation: the stored procedures a check starts, each a queue reader in its own session.

A check that finds activation necessary starts the queue's procedure below
MAX_QUEUE_READERS (ACT-10). Each procedure RECEIVEs, works, commits and
RECEIVEs again until a RECEIVE finds nothing, then exits; when the last of
a queue's procedures has exited, its monitor looks again.
"""

from __future__ import annotations

from collections.abc import Callable

from sbtck.contract import QueueRef
from sbtck.engine.activation_room import ActivatedTask, ActivationRoom, Monitoring, QueueMonitor
from sbtck.engine.choosing import (
    A_WAITING_READER,
    AFTER_THE_OTHERS,
    AS_DUE,
    NEXT_READER,
    ONCE_SETTLED,
    STEP_ORDER,
    THE_COMMITTER,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Message, Queue, ReaderBehaviour
from sbtck.engine.transactions import Session
from sbtck.observations import Kind, Trigger


@mypyc_attr(allow_interpreted_subclasses=True)
class InternalActivation(ActivationRoom):
    def __init__(
        self,
        ctx: Context,
        monitoring: Monitoring,
        procedures: Callable[[QueueRef, str], ReaderBehaviour],
        new_session: Callable[[str], Session],
    ) -> None:
        super().__init__(ctx, monitoring)
        self.procedures = procedures
        self.new_session = new_session
        # whether a timer notification is due at this instant and has not run yet (the broker's, handed over by watch)
        self.timer_pending: Callable[[], bool] = lambda: False
        self._ordinals: dict[QueueRef, int] = {key: 0 for key in ctx.queues}

    # ------------------------------------------------------------ decisions
    def internal(self, queue: Queue) -> bool:
        """Internal activation is for a queue whose activation STATUS is ON and names a procedure."""
        return bool(queue.activation.status and queue.activation.procedure_name)

    def internal_occurs(self, queue: Queue) -> bool:
        """ACT-10: a new procedure only below MAX_QUEUE_READERS."""
        return len(self.tasks[queue.key]) < queue.activation.max_queue_readers

    def activate(self, queue: Queue, monitor: QueueMonitor) -> None:
        """The second decision of a check that found activation necessary, for the queue's procedure: started, or
        withheld at MAX_QUEUE_READERS."""
        if not self.internal(queue):
            return
        if self.internal_occurs(queue):
            self.start_procedure(queue, monitor)
        else:
            self.withheld(queue, "MAX_QUEUE_READERS")

    # ----------------------------------------------------------- procedures
    def start_procedure(self, queue: Queue, monitor: QueueMonitor) -> None:
        name = queue.activation.procedure_name or ""
        self._ordinals[queue.key] += 1
        ordinal = self._ordinals[queue.key]
        session = self.new_session(f"{queue.key.queue}#{ordinal}")
        task = ActivatedTask(queue.key, ordinal, session, self.procedures(queue.key, name))
        self.tasks[queue.key].append(task)
        monitor.last_activated_ms = self.clock.now_ms
        self.log.add(
            {
                "task": ordinal,
                "spid": session.spid,
                "procedure_name": name,
                **queue.key.fields(),
                "at_ms": self.clock.now_ms,
                "kind": Kind.PROCEDURE_STARTED,
            }
        )
        self.clock.soon(lambda: self._next_receive(task))

    def _running(self, task: ActivatedTask) -> bool:
        return task in self.tasks[task.key]

    def _next_receive(self, task: ActivatedTask) -> None:
        task.starting = False
        if not self._running(task) or not task.procedure.receives:
            return
        self.receiving.begin(task.session)
        self.receiving.receive(
            task.session,
            task.key,
            top=task.procedure.receive_top,
            waitfor_ms=task.procedure.waitfor_ms,
            on_result=lambda rows, group: self._received(task, rows),
        )

    def _received(self, task: ActivatedTask, rows: list[Message]) -> None:
        if not rows:
            self.receiving.commit(task.session)
            self.exit_procedure(task, "empty RECEIVE")
            return
        task.step_due_ms = self.clock.now_ms + task.procedure.work_ms
        due = self.clock.at(task.step_due_ms, lambda: self._worked(task))
        task.cancel_work = lambda: setattr(due, "cancelled", True)

    def _worked(self, task: ActivatedTask) -> None:
        """The procedure commits and RECEIVEs again, one step: looked at at its end, or once the instant settled.

        Where the instant's timer notification has not run yet and the run takes its look first (TIMER_AND_STEP),
        the step waits for it."""
        if (
            not task.after_the_timer
            and task.key in self.monitors
            and self.timer_pending()
            and self.checks.timer_first(task.key)
        ):
            task.after_the_timer = True
            due = self.clock.soon(lambda: self._worked(task))
            task.cancel_work = lambda: setattr(due, "cancelled", True)
            return
        if self._after_the_others(task):
            task.after_the_others = True
            due = self.clock.soon(lambda: self._worked(task))
            task.cancel_work = lambda: setattr(due, "cancelled", True)
            return
        task.step_due_ms, task.after_the_timer, task.after_the_others = None, False, False
        if self.check_moment.of(self.chooser) == ONCE_SETTLED:
            self._commit_and_receive(task, at_once=False)
            return
        self.checks.after_the_step(lambda: self._commit_and_receive(task, at_once=True))

    def _after_the_others(self, task: ActivatedTask) -> bool:
        """STEP_ORDER, asked where other procedures of the queue end their work at this instant too: each step may
        come after theirs (once). Whichever moment the monitor looks at, the order shows in which procedure's next
        RECEIVE takes a group first."""
        now = self.clock.now_ms
        if task.after_the_others:
            return False
        if not any(t is not task and t.step_due_ms == now for t in self.tasks[task.key]):
            return False
        self.chooser.about(task.key.instance, {"step_order": task.session.name, "at_ms": now})
        return self.chooser.choose(STEP_ORDER, [AS_DUE, AFTER_THE_OTHERS]) == AFTER_THE_OTHERS

    def _commit_and_receive(self, task: ActivatedTask, at_once: bool) -> None:
        # a choice only while a reader waits on the queue: else the procedure gets the group again either way
        waiting = bool(self.receiving.waits[task.key])
        if waiting:
            self.chooser.about(task.key.instance, {"session": task.session.name, "at_ms": self.clock.now_ms})
        if not waiting or self.chooser.choose(NEXT_READER, [A_WAITING_READER, THE_COMMITTER]) == A_WAITING_READER:
            self.receiving.commit(task.session)
            if at_once:
                self._next_receive(task)
            else:  # the monitor looks only once the instant has settled: no one sees the procedure between the two
                self.clock.soon(lambda: self._next_receive(task))
            return
        touched = self.receiving.commit(task.session, serve=False)
        self._next_receive(task)
        for key in touched:
            self.receiving.serve(key)

    def exit_procedure(self, task: ActivatedTask, reason: str) -> None:
        task.cancel_work()
        self.receiving.cancel_wait(task.session)
        self.tasks[task.key].remove(task)
        if task.session.in_transaction:
            self.receiving.rollback(task.session)
        self.log.add(
            {
                "task": task.ordinal,
                "spid": task.session.spid,
                "reason": reason,
                **task.key.fields(),
                "at_ms": self.clock.now_ms,
                "kind": Kind.PROCEDURE_EXITED,
            }
        )
        if not self.tasks[task.key]:
            self.checks.evaluate(self.queues[task.key], Trigger.ALL_EXITED)

    def find_task(self, key: QueueRef, ordinal: int) -> ActivatedTask | None:
        return next((t for t in self.tasks[key] if t.ordinal == ordinal), None)
