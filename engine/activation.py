"""Queue monitors: whether activation is necessary, and whether it occurs.

Each decision is a method of its own so that a reader of the code finds
the rule it implements in one place (the docstring names it), and so that
the kit's tests can build deliberately wrong brokers by overriding one.

The monitors are what the rest of the engine calls, and what the readers
tell (``ReceiveActivity``); they create and remove a queue's monitor, and
hand the rest to their rooms (``activation_room.py`` says what they share),
each built from a ``ClassVar``: the checks and the first decision
(``monitor_checks.py``), internal activation (``internal_activation.py``)
and external activation (``external_activation.py``). A variant that gets
one of these wrong subclasses the room that holds the method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from sbtck.contract import QueueRef
from sbtck.engine.activation_room import ActivatedTask, Monitoring, QueueMonitor
from sbtck.engine.choosing import EMPTY_MEMORY, THE_MONITORS, THE_QUEUES, Reading
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.external_activation import ExternalActivation
from sbtck.engine.internal_activation import InternalActivation
from sbtck.engine.model import Queue, ReaderBehaviour
from sbtck.engine.monitor_checks import MonitorChecks
from sbtck.engine.receiving import ReceiveActivity, Receiving
from sbtck.engine.transactions import Session
from sbtck.observations import Kind, Trigger


@mypyc_attr(allow_interpreted_subclasses=True)
class QueueMonitors(ReceiveActivity):
    checks_class: ClassVar[type[MonitorChecks]] = MonitorChecks
    internal_class: ClassVar[type[InternalActivation]] = InternalActivation
    external_class: ClassVar[type[ExternalActivation]] = ExternalActivation

    def __init__(
        self,
        ctx: Context,
        procedures: Callable[[QueueRef, str], ReaderBehaviour],
        new_session: Callable[[str], Session],
    ) -> None:
        self.clock = ctx.clock
        self.log = ctx.log
        self.chooser = ctx.chooser
        monitoring = Monitoring(ctx.queues)
        # what the broker's views read: the state every room shares
        self.monitors = monitoring.monitors
        self.tasks = monitoring.tasks
        self.checks = self.checks_class(ctx, monitoring)
        self.internal_activation = self.internal_class(ctx, monitoring, procedures, new_session)
        self.external_activation = self.external_class(ctx, monitoring)
        self.empty_memory = Reading(EMPTY_MEMORY, THE_MONITORS, THE_QUEUES)
        self.last_empty: dict[QueueRef, int] = {}  # per queue, its last empty result, with or without a monitor

    def watch(self, receiving: Receiving, timer_pending: Callable[[], bool]) -> None:
        """The readers, once built on the monitors they tell, and whether a timer notification is due at this
        instant and has not run yet (the broker's)."""
        rooms = (self.checks, self.internal_activation, self.external_activation)
        for room in rooms:
            room.join(*rooms, receiving)
        self.internal_activation.timer_pending = timer_pending

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

    # what the rest of the engine asks: each in the room of its concern
    def notifications_dropped(self, queue: Queue) -> None:
        self.external_activation.notifications_dropped(queue)

    def on_timer(self, only: str | None = None) -> None:
        self.checks.on_timer(only)

    def evaluate(self, queue: Queue, trigger: str, arrived_on_empty: bool = False) -> None:
        self.checks.evaluate(queue, trigger, arrived_on_empty)

    def looks_at_once(self, key: QueueRef, readers_wait: bool) -> bool:
        return self.checks.looks_at_once(key, readers_wait)

    def evaluate_after_the_reader(self, queue: Queue, trigger: str, arrived_on_empty: bool = False) -> None:
        self.checks.evaluate_after_the_reader(queue, trigger, arrived_on_empty)

    def exit_procedure(self, task: ActivatedTask, reason: str) -> None:
        self.internal_activation.exit_procedure(task, reason)

    def find_task(self, key: QueueRef, ordinal: int) -> ActivatedTask | None:
        return self.internal_activation.find_task(key, ordinal)

    # --------------------------------------------------- what readers tell us
    def receive_called(self, queue: Queue) -> None:
        self.external_activation.receive_called(queue)

    def receive_finished(self, queue: Queue, *, empty: bool, has_where: bool) -> None:
        if empty and self.checks.counts_empty(has_where):
            self._empty(queue)
        self.checks.evaluate(queue, Trigger.RECEIVE)

    def receive_waiting(self, queue: Queue) -> None:
        self.checks.evaluate(queue, Trigger.RECEIVE)

    def group_got(self, queue: Queue, *, empty: bool) -> None:
        """GET CONVERSATION GROUP returned, read as no RECEIVE: its empty result still counts for ACT-07."""
        if empty and self.checks.counts_empty(False):
            self._empty(queue)

    def _empty(self, queue: Queue) -> None:
        self.last_empty[queue.key] = self.clock.now_ms
        monitor = self.monitors.get(queue.key)
        if monitor is not None:
            monitor.last_empty_ms = self.clock.now_ms

    def rolled_back(self, queue: Queue, after_the_reader: bool = False) -> None:
        if after_the_reader:
            self.checks.evaluate_after_the_reader(queue, Trigger.ROLLBACK)
        else:
            self.checks.evaluate(queue, Trigger.ROLLBACK)
