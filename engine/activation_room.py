"""What the rooms of the queue monitors (sbtck/engine/activation.py) share: the context, the monitors' state, one
another.

Each room is one concern of activation: when a monitor checks its queue
and whether activation is necessary (``monitor_checks.py``), internal
activation and the procedures it starts (``internal_activation.py``), and
external activation by the QUEUE_ACTIVATION event notification
(``external_activation.py``). A check starts a procedure or raises a
notification; a procedure's exit and a notification's time-out are checks
again: so each room holds the others, joined once all are built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sbtck.contract import QueueRef
from sbtck.engine.choosing import AT_THE_TRIGGER, CHECK_MOMENT, ONCE_SETTLED, Reading
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Queue, ReaderBehaviour
from sbtck.engine.transactions import Session
from sbtck.observations import Kind

if TYPE_CHECKING:  # the rooms call one another: each module names the others only for its types
    from sbtck.engine.external_activation import ExternalActivation
    from sbtck.engine.internal_activation import InternalActivation
    from sbtck.engine.monitor_checks import MonitorChecks
    from sbtck.engine.receiving import Receiving


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


class Monitoring:
    """What every room reads and changes: the same objects in each."""

    def __init__(self, queues: Iterable[QueueRef]) -> None:
        self.monitors: dict[QueueRef, QueueMonitor] = {}
        self.tasks: dict[QueueRef, list[ActivatedTask]] = {key: [] for key in queues}
        # whether a monitor looks at a trigger, or once the instant has settled (asked once, for every room)
        self.check_moment = Reading(CHECK_MOMENT, ONCE_SETTLED, AT_THE_TRIGGER)


@mypyc_attr(allow_interpreted_subclasses=True)
class ActivationRoom:
    """One room of the queue monitors: what it keeps of the context and of their state, and the other rooms."""

    def __init__(self, ctx: Context, monitoring: Monitoring) -> None:
        self.queues = ctx.queues
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.chooser = ctx.chooser
        self.monitors = monitoring.monitors
        self.tasks = monitoring.tasks
        self.check_moment = monitoring.check_moment
        # the other rooms and the readers, set by join: each room is built before the others exist, and the
        # readers after the monitors they tell
        self.checks: MonitorChecks
        self.internal_activation: InternalActivation
        self.external_activation: ExternalActivation
        self.receiving: Receiving

    def join(
        self,
        checks: MonitorChecks,
        internal_activation: InternalActivation,
        external_activation: ExternalActivation,
        receiving: Receiving,
    ) -> None:
        self.checks = checks
        self.internal_activation = internal_activation
        self.external_activation = external_activation
        self.receiving = receiving

    def withheld(self, queue: Queue, reason: str) -> None:
        """The second decision of a check that found activation necessary: it does not occur, for REASON."""
        self.log.add(
            {"reason": reason, **queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.ACTIVATION_WITHHELD}
        )
