"""External activation: the QUEUE_ACTIVATION event notification, and the time-out that keeps it from repeating.

A check that finds activation necessary raises the queue's notifications
unless the last one's time-out still runs (ACT-12); an application calling
RECEIVE ends the time-out (ACT-13), and so, where the run takes it so,
does dropping the queue's last notification (DROPPED_TIME_OUT).
"""

from __future__ import annotations

from sbtck.engine.activation_room import ActivationRoom, Monitoring, QueueMonitor
from sbtck.engine.choosing import DROPPED_TIME_OUT, ENDS_WITH_IT, RUNS_OUT, Reading
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Queue
from sbtck.observations import Kind, Trigger


@mypyc_attr(allow_interpreted_subclasses=True)
class ExternalActivation(ActivationRoom):
    def __init__(self, ctx: Context, monitoring: Monitoring) -> None:
        super().__init__(ctx, monitoring)
        self.dropped_time_out = Reading(DROPPED_TIME_OUT, RUNS_OUT, ENDS_WITH_IT)

    def external_occurs(self, monitor: QueueMonitor) -> bool:
        """ACT-12: no new notification while the last one's time-out runs."""
        return monitor.notified_until_ms is None

    def activate(self, queue: Queue, monitor: QueueMonitor) -> None:
        """The second decision of a check that found activation necessary, for the queue's notifications: raised,
        or withheld while the last one's time-out runs."""
        if not queue.notifications:
            return
        if self.external_occurs(monitor):
            self.notify(queue, monitor)
        else:
            self.withheld(queue, "notification time-out")

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
        self.checks.evaluate(queue, Trigger.TIME_OUT)

    def receive_called(self, queue: Queue) -> None:
        """ACT-13: an application calling RECEIVE ends the notification's time-out."""
        monitor = self.monitors.get(queue.key)
        if monitor is not None and monitor.notified_until_ms is not None:
            monitor.cancel_time_out()
            monitor.notified_until_ms = None

    def notifications_dropped(self, queue: Queue) -> None:
        """The queue's last event notification is gone: a QUEUE_ACTIVATION time-out still running runs out, or
        ends with it (DROPPED_TIME_OUT)."""
        monitor = self.monitors.get(queue.key)
        if monitor is None or monitor.notified_until_ms is None:
            return
        if self.dropped_time_out.of(self.chooser) == ENDS_WITH_IT:
            monitor.cancel_time_out()
            monitor.notified_until_ms = None
