"""Queue monitors: whether activation is necessary, and whether it occurs.

Each decision is a method of its own so that a reader of the code finds
the rule it implements in one place (the docstring names it), and so that
the kit's tests can build deliberately wrong brokers by overriding one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sbtck.contract import QueueRef
from sbtck.engine.choosing import (
    A_WAITING_READER,
    AFTER_THE_OTHERS,
    ARRIVAL_LOOK,
    AS_DUE,
    AT_THE_TRIGGER,
    CHECK_MOMENT,
    DROPPED_TIME_OUT,
    EMPTY_MEMORY,
    ENDS_WITH_IT,
    LOOK_FIRST,
    NEXT_READER,
    ONCE_SETTLED,
    QUIET_SPAN,
    READER_FIRST,
    RUNS_OUT,
    STEP_FIRST,
    STEP_ORDER,
    THE_COMMITTER,
    THE_MONITORS,
    THE_QUEUES,
    TIMER_AND_STEP,
    TIMER_FIRST,
    Chooser,
    FirstChooser,
    Reading,
    Span,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Message, Queue, ReaderBehaviour
from sbtck.engine.receiving import ReceiveActivity, Receiving
from sbtck.engine.transactions import Session
from sbtck.observations import Kind, Trigger

# plain strings: an event's fields cross process boundaries (xdist, pickle, JSON)
ARRIVAL = Trigger.MESSAGE_ARRIVED
RECEIVE = Trigger.RECEIVE
ROLLBACK = Trigger.ROLLBACK
ALL_EXITED = Trigger.ALL_EXITED
ALTER = Trigger.ALTER_QUEUE
TIMER = Trigger.TIMER_NOTIFICATION
TIME_OUT = Trigger.TIME_OUT


@dataclass
class QueueMonitor:
    """ACT-04: what a monitor tracks; messages ready and running procedures are read off the queue and tasks."""

    key: QueueRef
    last_empty_ms: int | None = None
    last_activated_ms: int | None = None
    notified_until_ms: int | None = None
    cancel_time_out: Callable[[], None] = field(default=lambda: None)


@dataclass
class ActivatedTask:
    key: QueueRef
    ordinal: int
    session: Session
    procedure: ReaderBehaviour
    cancel_work: Callable[[], None] = field(default=lambda: None)
    # when its work ends (its next step: commit and RECEIVE again), while it works
    step_due_ms: int | None = None
    # its step waits for the timer notification of its instant (TIMER_AND_STEP)
    after_the_timer: bool = False
    # its step waits for the other steps of its queue due at its instant (STEP_ORDER)
    after_the_others: bool = False
    # started, its first RECEIVE not yet issued: a monitor looking at the trigger can see it so
    starting: bool = True


@mypyc_attr(allow_interpreted_subclasses=True)
class QueueMonitors(ReceiveActivity):
    def __init__(
        self,
        ctx: Context,
        procedures: Callable[[QueueRef, str], ReaderBehaviour],
        new_session: Callable[[str], Session],
    ) -> None:
        self.queues = ctx.queues
        self.procedures = procedures
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.new_session = new_session
        self.receiving: Receiving  # set by the broker; the two refer to each other
        self.chooser: Chooser = FirstChooser()  # the broker's, once it has one
        # whether a timer notification is due at this instant and has not run yet (the broker's, once it has one)
        self.timer_pending: Callable[[], bool] = lambda: False
        self.check_moment = Reading(CHECK_MOMENT, ONCE_SETTLED, AT_THE_TRIGGER)
        self.quietness = Span(QUIET_SPAN)
        # AT_THE_TRIGGER: the looks an activated procedure's step raised, made when it is done; None outside one
        self._in_step: list[Callable[[], None]] | None = None
        self.dropped_time_out = Reading(DROPPED_TIME_OUT, RUNS_OUT, ENDS_WITH_IT)
        self.empty_memory = Reading(EMPTY_MEMORY, THE_MONITORS, THE_QUEUES)
        self.last_empty: dict[QueueRef, int] = {}  # per queue, its last empty result, with or without a monitor
        self.monitors: dict[QueueRef, QueueMonitor] = {}
        self.tasks: dict[QueueRef, list[ActivatedTask]] = {key: [] for key in ctx.queues}
        self._ordinals: dict[QueueRef, int] = {key: 0 for key in ctx.queues}

    # ------------------------------------------------------------ existence
    def should_monitor(self, queue: Queue) -> bool:
        """ACT-02: activation STATUS = ON or a QUEUE_ACTIVATION notification, nothing else."""
        return queue.activation.status or bool(queue.notifications)

    def sync(self, queue: Queue) -> None:
        wanted = self.should_monitor(queue)
        present = queue.key in self.monitors
        if wanted and not present:
            self.monitors[queue.key] = monitor = QueueMonitor(queue.key)
            earlier = self.last_empty.get(queue.key)
            if earlier is not None and self.empty_memory.of(self.chooser) == THE_QUEUES:
                monitor.last_empty_ms = earlier
            self.log.add({**queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.MONITOR_CREATED})
        elif present and not wanted:
            self.monitors.pop(queue.key).cancel_time_out()
            self.log.add({**queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.MONITOR_REMOVED})

    def notifications_dropped(self, queue: Queue) -> None:
        """The queue's last event notification is gone: a QUEUE_ACTIVATION time-out still running runs out, or
        ends with it (DROPPED_TIME_OUT)."""
        monitor = self.monitors.get(queue.key)
        if monitor is None or monitor.notified_until_ms is None:
            return
        if self.dropped_time_out.of(self.chooser) == ENDS_WITH_IT:
            monitor.cancel_time_out()
            monitor.notified_until_ms = None

    # ------------------------------------------------------------ decisions
    def necessary(self, queue: Queue, monitor: QueueMonitor, trigger: str, arrived_on_empty: bool) -> str | None:
        """ACT-06 and ACT-07: would a new queue reader have useful work? Returns the rule that says so."""
        if trigger == ARRIVAL and arrived_on_empty and not self.tasks[queue.key]:
            return "ACT-06"
        if queue.unread() and self.waiting_readers(queue.key) == 0 and self.quiet(monitor):
            return "ACT-07"
        return None

    def waiting_readers(self, key: QueueRef) -> int:
        """ACT-07/ACT-08: sessions waiting in GET CONVERSATION GROUP or a RECEIVE without WHERE; and a procedure
        started and not yet reading, which is about to (only a monitor looking at the trigger sees one): "as long
        as ... the second queue reader remains running, the queue monitor does not start another queue reader"."""
        return self.receiving.tasks_waiting(key) + sum(1 for t in self.tasks[key] if t.starting)

    def quiet(self, monitor: QueueMonitor) -> bool:
        """ACT-07: no empty result from a RECEIVE without WHERE for a few seconds."""
        if monitor.last_empty_ms is None:
            return True
        window = round(self.params.activation_empty_window_s * 1000)
        return self.quietness.over(self.clock.now_ms, monitor.last_empty_ms + window, self.chooser)

    def internal(self, queue: Queue) -> bool:
        """Internal activation is for a queue whose activation STATUS is ON and names a procedure."""
        return bool(queue.activation.status and queue.activation.procedure_name)

    def internal_occurs(self, queue: Queue) -> bool:
        """ACT-10: a new procedure only below MAX_QUEUE_READERS."""
        return len(self.tasks[queue.key]) < queue.activation.max_queue_readers

    def external_occurs(self, monitor: QueueMonitor) -> bool:
        """ACT-12: no new notification while the last one's time-out runs."""
        return monitor.notified_until_ms is None

    def counts_empty(self, has_where: bool) -> bool:
        """ACT-08: an empty RECEIVE with a WHERE clause does not count for ACT-07."""
        return not has_where

    # ----------------------------------------------------------- evaluation
    def on_timer(self, only: str | None = None) -> None:
        """PER-1A: on every timer notification each queue monitor (of the instance ONLY names, if it names one)
        looks at its queue; before a procedure's step due at the same instant, where the run takes the look first
        (TIMER_AND_STEP), else as any trigger."""
        now = self.clock.now_ms
        for key in list(self.monitors):
            if only is not None and key.instance != only:
                continue
            due = [t for t in self.tasks[key] if t.step_due_ms == now]
            if any(t.after_the_timer for t in due) or (due and self._timer_first(key)):
                self._evaluate(self.queues[key], TIMER, False)
            else:
                self.evaluate(self.queues[key], TIMER)

    def _timer_first(self, key: QueueRef) -> bool:
        """TIMER_AND_STEP, asked where a timer notification and a procedure's step of KEY share an instant."""
        self.chooser.about(key.instance, {"timer_and_step": key.queue, "at_ms": self.clock.now_ms})
        return self.chooser.choose(TIMER_AND_STEP, [STEP_FIRST, TIMER_FIRST]) == TIMER_FIRST

    def evaluate(self, queue: Queue, trigger: str, arrived_on_empty: bool = False) -> None:
        """ACT-05: a trigger makes the monitor look, once the instant has settled.

        A queue with no monitor has nothing to look (``_evaluate``): only a command adds or removes a monitor, and
        nothing is left to settle when one starts, so the queue still has none once this instant settles.
        """
        if queue.key not in self.monitors:
            return
        moment = self.check_moment.of(self.chooser)
        if moment == ONCE_SETTLED:
            self.clock.settle(lambda: self._evaluate(queue, trigger, arrived_on_empty))
        elif self._in_step is not None:
            self._in_step.append(lambda: self._evaluate(queue, trigger, arrived_on_empty))
        else:
            self._evaluate(queue, trigger, arrived_on_empty)

    def looks_at_once(self, key: QueueRef, readers_wait: bool) -> bool:
        """Whether a new message on KEY (or one a rollback returned) is looked at before a waiting reader takes it:
        at the trigger it is, unless the run lets the reader take it first (ARRIVAL_LOOK, asked where one waits).
        Once the instant has settled, whether its look comes before the look at the RECEIVE of the reader it served
        (ARRIVAL_LOOK again, the reader's look first by default: both are looks of one instant)."""
        settled = self.check_moment.of(self.chooser) == ONCE_SETTLED
        if not readers_wait:
            return not settled
        self.chooser.about(key.instance, {"arrival_look": key.queue, "at_ms": self.clock.now_ms})
        options = [READER_FIRST, LOOK_FIRST] if settled else [LOOK_FIRST, READER_FIRST]
        return self.chooser.choose(ARRIVAL_LOOK, options) == LOOK_FIRST

    def evaluate_after_the_reader(self, queue: Queue, trigger: str, arrived_on_empty: bool = False) -> None:
        """The look at a trigger a waiting reader was served before (``looks_at_once`` false): once the instant has
        settled, or, at the trigger, once the reader's RECEIVE and what its own look set off (a procedure started
        and its first RECEIVE) have run."""
        if self.check_moment.of(self.chooser) == ONCE_SETTLED:
            self.evaluate(queue, trigger, arrived_on_empty)
        else:
            self.clock.soon(lambda: self.evaluate(queue, trigger, arrived_on_empty))

    def _evaluate(self, queue: Queue, trigger: str, arrived_on_empty: bool) -> None:
        """ACT-01: two decisions in order - is activation necessary, then does it occur (internal and external)."""
        monitor = self.monitors.get(queue.key)
        if monitor is None:
            return
        reason = self.necessary(queue, monitor, trigger, arrived_on_empty)
        if reason is None:
            return
        now = self.clock.now_ms
        self.log.add(
            {"rule": reason, "trigger": trigger, **queue.key.fields(), "at_ms": now, "kind": Kind.ACTIVATION_NECESSARY}
        )
        if self.internal(queue):
            if self.internal_occurs(queue):
                self.start_procedure(queue, monitor)
            else:
                self.log.add(
                    {
                        "reason": "MAX_QUEUE_READERS",
                        **queue.key.fields(),
                        "at_ms": now,
                        "kind": Kind.ACTIVATION_WITHHELD,
                    }
                )
        if queue.notifications:
            if self.external_occurs(monitor):
                self.notify(queue, monitor)
            else:
                self.log.add(
                    {
                        "reason": "notification time-out",
                        **queue.key.fields(),
                        "at_ms": now,
                        "kind": Kind.ACTIVATION_WITHHELD,
                    }
                )

    def notify(self, queue: Queue, monitor: QueueMonitor) -> None:
        now = self.clock.now_ms
        for name in queue.notifications:
            self.log.add(
                {
                    "event_type": "QUEUE_ACTIVATION",
                    "notification": name,
                    **queue.key.fields(),
                    "at_ms": now,
                    "kind": Kind.EVENT_NOTIFICATION,
                }
            )
        monitor.last_activated_ms = now
        until = now + round(self.params.external_activation_timeout_s * 1000)
        monitor.notified_until_ms = until
        due = self.clock.at(until, lambda: self._time_out(queue, monitor))
        monitor.cancel_time_out = lambda: setattr(due, "cancelled", True)

    def _time_out(self, queue: Queue, monitor: QueueMonitor) -> None:
        monitor.notified_until_ms = None
        self.log.add({**queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.ACTIVATION_TIME_OUT})
        self.evaluate(queue, TIME_OUT)

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
            and self._timer_first(task.key)
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
        looks: list[Callable[[], None]] = []
        self._in_step = looks
        try:
            self._commit_and_receive(task, at_once=True)
        finally:
            self._in_step = None
        for look in looks:
            look()

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
            self.evaluate(self.queues[task.key], ALL_EXITED)

    def find_task(self, key: QueueRef, ordinal: int) -> ActivatedTask | None:
        return next((t for t in self.tasks[key] if t.ordinal == ordinal), None)

    # --------------------------------------------------- what readers tell us
    def receive_called(self, queue: Queue) -> None:
        """ACT-13: an application calling RECEIVE ends the notification's time-out."""
        monitor = self.monitors.get(queue.key)
        if monitor is not None and monitor.notified_until_ms is not None:
            monitor.cancel_time_out()
            monitor.notified_until_ms = None

    def receive_finished(self, queue: Queue, *, empty: bool, has_where: bool) -> None:
        if empty and self.counts_empty(has_where):
            self._empty(queue)
        self.evaluate(queue, RECEIVE)

    def receive_waiting(self, queue: Queue) -> None:
        self.evaluate(queue, RECEIVE)

    def group_got(self, queue: Queue, *, empty: bool) -> None:
        """GET CONVERSATION GROUP returned, read as no RECEIVE: its empty result still counts for ACT-07."""
        if empty and self.counts_empty(False):
            self._empty(queue)

    def _empty(self, queue: Queue) -> None:
        self.last_empty[queue.key] = self.clock.now_ms
        monitor = self.monitors.get(queue.key)
        if monitor is not None:
            monitor.last_empty_ms = self.clock.now_ms

    def rolled_back(self, queue: Queue, after_the_reader: bool = False) -> None:
        if after_the_reader:
            self.evaluate_after_the_reader(queue, ROLLBACK)
        else:
            self.evaluate(queue, ROLLBACK)
