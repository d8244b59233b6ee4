"""When a queue monitor checks its queue, and the first of a check's two decisions: is activation necessary.

A trigger (ACT-05) makes the monitor look at its queue at the trigger or
once the instant has settled (CHECK_MOMENT); the timer notification makes
every monitor look (PER-1A). A check that finds activation necessary
(ACT-06, ACT-07, ACT-08) hands the second decision, whether it occurs, to
internal and to external activation.
"""

from __future__ import annotations

from collections.abc import Callable

from sbtck.contract import QueueRef
from sbtck.engine.activation_room import ActivationRoom, Monitoring, QueueMonitor
from sbtck.engine.choosing import (
    ARRIVAL_LOOK,
    LOOK_FIRST,
    ONCE_SETTLED,
    QUIET_SPAN,
    READER_FIRST,
    STEP_FIRST,
    TIMER_AND_STEP,
    TIMER_FIRST,
    Span,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Queue
from sbtck.observations import Kind, Trigger


@mypyc_attr(allow_interpreted_subclasses=True)
class MonitorChecks(ActivationRoom):
    def __init__(self, ctx: Context, monitoring: Monitoring) -> None:
        super().__init__(ctx, monitoring)
        self.quietness = Span(QUIET_SPAN)
        # AT_THE_TRIGGER: the looks an activated procedure's step raised, made when it is done; None outside one
        self._in_step: list[Callable[[], None]] | None = None

    # ------------------------------------------------------------ decisions
    def necessary(self, queue: Queue, monitor: QueueMonitor, trigger: str, arrived_on_empty: bool) -> str | None:
        """ACT-06 and ACT-07: would a new queue reader have useful work? Returns the rule that says so."""
        if trigger == Trigger.ARRIVAL and arrived_on_empty and not self.tasks[queue.key]:
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
            if any(t.after_the_timer for t in due) or (due and self.timer_first(key)):
                self._evaluate(self.queues[key], Trigger.TIMER, False)
            else:
                self.evaluate(self.queues[key], Trigger.TIMER)

    def timer_first(self, key: QueueRef) -> bool:
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

    def after_the_step(self, step: Callable[[], None]) -> None:
        """AT_THE_TRIGGER: the looks an activated procedure's STEP raises are made once it is done."""
        looks: list[Callable[[], None]] = []
        self._in_step = looks
        try:
            step()
        finally:
            self._in_step = None
        for look in looks:
            look()

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
        self.log.add(
            {
                "rule": reason,
                "trigger": trigger,
                **queue.key.fields(),
                "at_ms": self.clock.now_ms,
                "kind": Kind.ACTIVATION_NECESSARY,
            }
        )
        self.internal_activation.activate(queue, monitor)
        self.external_activation.activate(queue, monitor)
