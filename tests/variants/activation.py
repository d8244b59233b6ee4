"""Deliberately wrong brokers: each gets one activation rule wrong.

The suite has teeth only if every one of these fails at least one
scenario; ``test_wrong_variants.py`` runs the suite against each through
``--iut python:tests.variants.activation:NAME``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sbtck import contract
from sbtck.contract import QueueRef
from sbtck.engine import Broker
from sbtck.engine.activation import QueueMonitors
from sbtck.engine.activation_room import ActivatedTask, ActivationRoom, QueueMonitor
from sbtck.engine.choosing import AT_THE_TRIGGER
from sbtck.engine.external_activation import ExternalActivation
from sbtck.engine.internal_activation import InternalActivation
from sbtck.engine.model import Message, Queue
from sbtck.engine.monitor_checks import MonitorChecks
from sbtck.engine.receiving import GET_CONVERSATION_GROUP, RECEIVE, Receiving
from sbtck.engine.transactions import Session, Transactions, Wait
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind, Trigger
from tests.variants.rooms import monitors_with, receiving_with


class _UnreadCount(MonitorChecks):
    def necessary(self, queue: Queue, monitor: QueueMonitor, trigger: str, arrived_on_empty: bool) -> str | None:
        if trigger == Trigger.ARRIVAL and arrived_on_empty and not self.tasks[queue.key]:
            return "ACT-06"
        return "ACT-07" if queue.unread() else None


class _IgnoresMaxQueueReaders(InternalActivation):
    def internal_occurs(self, queue: Queue) -> bool:
        return True


class _IgnoresWhereClause(MonitorChecks):
    def waiting_readers(self, key: QueueRef) -> int:
        return len(self.receiving.waits[key])

    def counts_empty(self, has_where: bool) -> bool:
        return True


class _NoNotificationAfterTimeOut(ExternalActivation):
    def _time_out(self, queue: Queue, monitor: QueueMonitor) -> None:
        pass


class _TimeOutNotChecked(ExternalActivation):
    def _time_out(self, queue: Queue, monitor: QueueMonitor) -> None:
        monitor.notified_until_ms = None


class _KeepsMonitor(QueueMonitors):
    def should_monitor(self, queue: Queue) -> bool:
        return queue.key in self.monitors or super().should_monitor(queue)


class _ChecksOnlyOnTimer(MonitorChecks):
    def evaluate(self, queue: Queue, trigger: str, arrived_on_empty: bool = False) -> None:
        if trigger == "timer notification":
            super().evaluate(queue, trigger, arrived_on_empty)


class _NoRollbackCheck(QueueMonitors):
    def rolled_back(self, queue: Queue, after_the_reader: bool = False) -> None:
        pass


class _ReceiveKeepsNotificationPending(ExternalActivation):
    def receive_called(self, queue: Queue) -> None:
        pass


class _OnlyTheMaximumItselfStops(InternalActivation):
    def internal_occurs(self, queue: Queue) -> bool:
        return len(self.tasks[queue.key]) != queue.activation.max_queue_readers


class _EndedTimeOutStillExpires(ExternalActivation):
    def receive_called(self, queue: Queue) -> None:
        monitor = self.monitors.get(queue.key)
        if monitor is not None:
            monitor.notified_until_ms = None


class _StatusIgnored(InternalActivation):
    def internal(self, queue: Queue) -> bool:
        return bool(queue.activation.procedure_name)


class _WhereIgnored(Transactions):
    def matches(self, wait: Wait, message: Message) -> bool:
        return True


class _GetTakesTheMessages(Receiving):
    def _finish(self, wait: Wait, rows: list[Message], group: str | None) -> None:
        if wait.statement == GET_CONVERSATION_GROUP and group is not None:
            queue = self.queues[wait.queue]
            queue.messages = [m for m in queue.messages if m.group != group]
        super()._finish(wait, rows, group)


class _RollbackServesNoOne(Receiving):
    rolling_back = False

    def rollback(self, session: Session) -> None:
        self.rolling_back = True
        try:
            super().rollback(session)
        finally:
            self.rolling_back = False

    def serve(self, key: QueueRef) -> None:
        if not self.rolling_back:
            super().serve(key)


class _TopFillsFromTheNextGroup(Receiving):
    def _try_serve(self, wait: Wait) -> bool:
        if wait.statement != RECEIVE or wait.top is None:
            return super()._try_serve(wait)
        group = self.transactions.pick_group(wait)
        if group is None:
            return False
        queue = self.queues[wait.queue]
        rows: list[Message] = []
        kept: list[Message] = []
        for m in queue.messages:
            owner = self.transactions.locks.get((wait.queue, m.group))
            ours = m.group == group or (bool(rows) and owner in (None, wait.session))
            if len(rows) < wait.top and ours and self.transactions.matches(wait, m):
                rows.append(m)
            else:
                kept.append(m)
        queue.messages = kept
        self.transactions.lock(wait, group, rows)
        self._finish(wait, rows, group)
        return True


class _TimeOutEndsTheTransaction(Receiving):
    def _time_out(self, wait: Wait) -> None:
        session = wait.session
        super()._time_out(wait)
        if session.in_transaction and session.received:  # lets its groups go, as a commit would, and stays open
            self.transactions._end_transaction(session)
            session.in_transaction = True


class _BackOfTheQueue(Transactions):
    def rollback(self, session: Session) -> tuple[list[QueueRef], list[QueueRef]]:
        returned = list(session.received)
        touched = super().rollback(session)
        for key, message in returned:
            messages = self.queues[key].messages
            messages.remove(message)
            messages.append(message)
        return touched


class _KeepsTheFirstProcedure(InternalActivation):
    def start_procedure(self, queue: Queue, monitor: QueueMonitor) -> None:
        first = self.__dict__.setdefault("first_procedure", {}).setdefault(queue.key, queue.activation.procedure_name)
        altered, queue.activation.procedure_name = queue.activation.procedure_name, first
        try:
            super().start_procedure(queue, monitor)
        finally:
            queue.activation.procedure_name = altered


def _same_database(a: QueueRef, b: QueueRef) -> bool:
    return (a.instance, a.database) == (b.instance, b.database)


class _EmptyForTheDatabase(QueueMonitors):
    def _empty(self, queue: Queue) -> None:
        super()._empty(queue)
        for key, monitor in self.monitors.items():
            if _same_database(key, queue.key):
                monitor.last_empty_ms = self.clock.now_ms


class _TimingOut(Receiving):
    """Says, while a WAITFOR runs out, that it does (a class flag: a variant runs one broker at a time)."""

    timing_out = False

    def _time_out(self, wait: Wait) -> None:
        _TimingOut.timing_out = True
        try:
            super()._time_out(wait)
        finally:
            _TimingOut.timing_out = False


class _TimedOutIsNoEmptyResult(QueueMonitors):
    def _empty(self, queue: Queue) -> None:
        if not _TimingOut.timing_out:
            super()._empty(queue)


class _MaximumOfTheDatabase(InternalActivation):
    def internal_occurs(self, queue: Queue) -> bool:
        running = sum(len(tasks) for key, tasks in self.tasks.items() if _same_database(key, queue.key))
        return running < queue.activation.max_queue_readers


class _TimeOutOfTheDatabase(ExternalActivation):
    def external_occurs(self, monitor: QueueMonitor) -> bool:
        return all(m.notified_until_ms is None for k, m in self.monitors.items() if _same_database(k, monitor.key))


class _AnyReceiveEndsTheTimeOut(ExternalActivation):
    def receive_called(self, queue: Queue) -> None:
        for key in list(self.monitors):
            if key.instance == queue.key.instance:
                super().receive_called(self.queues[key])


def _variant(part: type[QueueMonitors] | type[ActivationRoom], name: str) -> ReferenceImplementation:
    """A broker whose queue monitors are PART, or have PART in the place of the room it subclasses."""
    monitors = part if issubclass(part, QueueMonitors) else monitors_with(part)
    broker = type(f"{name}Broker", (Broker,), {"monitors_class": monitors})
    return ReferenceImplementation(broker_class=broker, name=f"wrong variant: {name}")


def _reading(receiving: type[Receiving], name: str) -> ReferenceImplementation:
    broker = type(f"{name}Broker", (Broker,), {"receiving_class": receiving})
    return ReferenceImplementation(broker_class=broker, name=f"wrong variant: {name}")


def top_fills_from_the_next_group() -> ReferenceImplementation:
    """RECEIVE TOP (n) whose conversation group holds fewer than n ready messages fills up from the next group."""
    return _reading(_TopFillsFromTheNextGroup, "top_fills_from_the_next_group")


def timed_out_wait_lets_the_group_go() -> ReferenceImplementation:
    """A WAITFOR (RECEIVE) that runs out inside a transaction that already received lets the groups it held go."""
    return _reading(_TimeOutEndsTheTransaction, "timed_out_wait_lets_the_group_go")


def rollback_returns_to_the_back() -> ReferenceImplementation:
    """What a rollback returns goes behind the messages that came since, its conversation's later ones included."""
    return _reading(receiving_with(_BackOfTheQueue), "rollback_returns_to_the_back")


def procedure_name_kept() -> ReferenceImplementation:
    """ALTER QUEUE ... PROCEDURE_NAME is ignored: each start is of the procedure the queue first started."""
    return _variant(_KeepsTheFirstProcedure, "procedure_name_kept")


def empty_result_for_the_database() -> ReferenceImplementation:
    """An empty RECEIVE on one queue restarts the quiet window (ACT-07) of every queue of its database."""
    return _variant(_EmptyForTheDatabase, "empty_result_for_the_database")


def timed_out_wait_is_no_empty_result() -> ReferenceImplementation:
    """A WAITFOR (RECEIVE) that runs out with nothing is not taken as an empty result set for ACT-07."""
    broker = type(
        "timed_out_wait_is_no_empty_resultBroker",
        (Broker,),
        {"monitors_class": _TimedOutIsNoEmptyResult, "receiving_class": _TimingOut},
    )
    return ReferenceImplementation(broker_class=broker, name="wrong variant: timed_out_wait_is_no_empty_result")


def max_queue_readers_of_the_database() -> ReferenceImplementation:
    """Compares MAX_QUEUE_READERS with the procedures running for every queue of the database, not the queue's."""
    return _variant(_MaximumOfTheDatabase, "max_queue_readers_of_the_database")


def time_out_of_the_database() -> ReferenceImplementation:
    """While one queue's QUEUE_ACTIVATION time-out runs, no queue of its database is notified."""
    return _variant(_TimeOutOfTheDatabase, "time_out_of_the_database")


def any_receive_ends_the_time_out() -> ReferenceImplementation:
    """A RECEIVE on any queue of the instance ends every queue's notification time-out."""
    return _variant(_AnyReceiveEndsTheTimeOut, "any_receive_ends_the_time_out")


def where_ignored() -> ReferenceImplementation:
    """RECEIVE ... WHERE takes whatever a RECEIVE without it would."""
    return _reading(receiving_with(_WhereIgnored), "where_ignored")


def get_conversation_group_takes_the_messages() -> ReferenceImplementation:
    return _reading(_GetTakesTheMessages, "get_conversation_group_takes_the_messages")


def rollback_serves_no_one() -> ReferenceImplementation:
    """A rollback releases the group but leaves the reader waiting for it waiting."""
    return _reading(_RollbackServesNoOne, "rollback_serves_no_one")


def unread_count() -> ReferenceImplementation:
    """Activates whenever messages are unread, ignoring waiting readers and empty results."""
    return _variant(_UnreadCount, "unread_count")


def ignores_max_queue_readers() -> ReferenceImplementation:
    return _variant(_IgnoresMaxQueueReaders, "ignores_max_queue_readers")


def ignores_where_clause() -> ReferenceImplementation:
    """Counts RECEIVE ... WHERE as a waiting reader and its empty result as an empty result."""
    return _variant(_IgnoresWhereClause, "ignores_where_clause")


def no_notification_after_time_out() -> ReferenceImplementation:
    return _variant(_NoNotificationAfterTimeOut, "no_notification_after_time_out")


def time_out_not_checked() -> ReferenceImplementation:
    """Ends the time-out but waits for the next timer notification to look again."""
    return _variant(_TimeOutNotChecked, "time_out_not_checked")


def keeps_monitor() -> ReferenceImplementation:
    """Keeps a queue monitor after activation is turned off and the notification dropped."""
    return _variant(_KeepsMonitor, "keeps_monitor")


def checks_only_on_timer() -> ReferenceImplementation:
    return _variant(_ChecksOnlyOnTimer, "checks_only_on_timer")


def no_rollback_check() -> ReferenceImplementation:
    return _variant(_NoRollbackCheck, "no_rollback_check")


class _RollbackCheckedWhereMessagesCameBack(Receiving):
    """Takes a rollback for a check only where messages came back: a RECEIVE that returned nothing is forgotten."""

    def rollback(self, session: Session) -> None:
        session.read.clear()
        super().rollback(session)


def rollback_checked_where_messages_came_back() -> ReferenceImplementation:
    """ACT-05 read as "a transaction that RECEIVEd messages rolls back"; the document says "contains a RECEIVE
    statement", whatever it returned."""
    return _reading(_RollbackCheckedWhereMessagesCameBack, "rollback_checked_where_messages_came_back")


def receive_keeps_notification_pending() -> ReferenceImplementation:
    return _variant(_ReceiveKeepsNotificationPending, "receive_keeps_notification_pending")


def only_the_maximum_itself_stops() -> ReferenceImplementation:
    """Starts no procedure at MAX_QUEUE_READERS, but does above it (after MAX_QUEUE_READERS is lowered)."""
    return _variant(_OnlyTheMaximumItselfStops, "only_the_maximum_itself_stops")


def ended_time_out_still_expires() -> ReferenceImplementation:
    """Ends the notification's time-out on RECEIVE but lets the old one expire later, as if it still ran."""
    return _variant(_EndedTimeOutStillExpires, "ended_time_out_still_expires")


def status_ignored() -> ReferenceImplementation:
    """Starts the named procedure although activation STATUS is OFF."""
    return _variant(_StatusIgnored, "status_ignored")


class _FirstEmptyResultDecides(QueueMonitors):
    def receive_finished(self, queue: Queue, *, empty: bool, has_where: bool) -> None:
        monitor = self.monitors.get(queue.key)
        kept = monitor.last_empty_ms if monitor is not None else None
        super().receive_finished(queue, empty=empty, has_where=has_where)
        if monitor is not None and kept is not None:
            monitor.last_empty_ms = kept


def first_empty_result_decides() -> ReferenceImplementation:
    """Measures the quiet window from the first empty result, though a later RECEIVE found nothing again."""
    return _variant(_FirstEmptyResultDecides, "first_empty_result_decides")


class _TimedOutWaitStillWaits(Receiving):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.ghosts: Counter[QueueRef] = Counter()

    def _time_out(self, wait: Wait) -> None:
        if wait.session.wait is wait and not wait.has_where:
            self.ghosts[wait.queue] += 1
        super()._time_out(wait)

    def tasks_waiting(self, key: QueueRef) -> int:
        return super().tasks_waiting(key) + self.ghosts[key]


def timed_out_wait_still_waits() -> ReferenceImplementation:
    """Counts a session whose WAITFOR ran out as still waiting in RECEIVE."""
    return _reading(_TimedOutWaitStillWaits, "timed_out_wait_still_waits")


class _WaitersOnAnyQueueCount(MonitorChecks):
    def waiting_readers(self, key: QueueRef) -> int:
        return sum(self.receiving.tasks_waiting(other) for other in list(self.receiving.waits))


def waiters_on_any_queue_count() -> ReferenceImplementation:
    """Takes a session waiting in RECEIVE on any queue as a reader waiting on this one."""
    return _variant(_WaitersOnAnyQueueCount, "waiters_on_any_queue_count")


class _IdleTimeOutStaysNotified(ExternalActivation):
    def _time_out(self, queue: Queue, monitor: QueueMonitor) -> None:
        if self.checks.necessary(queue, monitor, Trigger.TIME_OUT, False) is None:
            self.log.add({**queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.ACTIVATION_TIME_OUT})
            return  # the monitor still thinks a notification is out
        super()._time_out(queue, monitor)


class _WhereLeavesTheTimeOut(Receiving):
    """The documents' other reading, which the fault needs to show: a RECEIVE with WHERE does not end the
    time-out ("an application calls RECEIVE" need not mean one that names its dialog)."""

    def receive(self, session: Session, key: QueueRef, **kwargs: Any) -> Wait:
        if kwargs.get("where_dialog") is None and kwargs.get("where_group") is None:
            return super().receive(session, key, **kwargs)
        called, self.watcher.receive_called = self.watcher.receive_called, lambda queue: None  # type: ignore[method-assign]
        try:
            return super().receive(session, key, **kwargs)
        finally:
            self.watcher.receive_called = called  # type: ignore[method-assign]


def idle_time_out_stays_notified() -> ReferenceImplementation:
    """A time-out that expires while activation is not necessary leaves the monitor waiting for a reader."""
    broker = type(
        "IdleTimeOutBroker",
        (Broker,),
        {"monitors_class": monitors_with(_IdleTimeOutStaysNotified), "receiving_class": _WhereLeavesTheTimeOut},
    )
    return ReferenceImplementation(broker_class=broker, name="wrong variant: idle_time_out_stays_notified")


class _TimeOutNotifiesWhileUnread(ExternalActivation):
    def _time_out(self, queue: Queue, monitor: QueueMonitor) -> None:
        if not queue.unread():
            super()._time_out(queue, monitor)
            return
        monitor.notified_until_ms = None
        self.log.add({**queue.key.fields(), "at_ms": self.clock.now_ms, "kind": Kind.ACTIVATION_TIME_OUT})
        self.notify(queue, monitor)


def time_out_notifies_while_unread() -> ReferenceImplementation:
    """A time-out that expires on a queue with unread messages notifies again, though a reader waits for them:
    ACT-13 creates another notification only "if activation is required"."""
    return _variant(_TimeOutNotifiesWhileUnread, "time_out_notifies_while_unread")


class _WithheldCountsAsActivated(InternalActivation):
    def internal_occurs(self, queue: Queue) -> bool:
        self.monitors[queue.key].last_activated_ms = self.clock.now_ms
        return super().internal_occurs(queue)


def withheld_counts_as_activated() -> ReferenceImplementation:
    """An activation found necessary but withheld at MAX_QUEUE_READERS moves last_activated_time, though it started
    nothing."""
    return _variant(_WithheldCountsAsActivated, "withheld_counts_as_activated")


class _WhereReceiveUnchecked(QueueMonitors):
    def receive_finished(self, queue: Queue, *, empty: bool, has_where: bool) -> None:
        if not has_where:
            super().receive_finished(queue, empty=empty, has_where=has_where)


def where_receive_unchecked() -> ReferenceImplementation:
    """A RECEIVE with a WHERE clause makes the monitor look at nothing (ACT-05 names every RECEIVE)."""
    return _variant(_WhereReceiveUnchecked, "where_receive_unchecked")


class _LooksBetweenCommitAndReceive(InternalActivation):
    """Looks at the trigger, and lets an activated procedure RECEIVE again only after the rest of the instant."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check_moment.taken = AT_THE_TRIGGER

    def _worked(self, task: ActivatedTask) -> None:
        self._commit_and_receive(task, at_once=False)


def looks_between_commit_and_receive() -> ReferenceImplementation:
    """Sees a procedure that has committed and not yet RECEIVEd again as not waiting, and starts another reader
    for the conversation the waiting one was just given: "as long as all the messages in the queue belong to the
    same conversation, and the second queue reader remains running, the queue monitor does not start another"."""
    return _variant(_LooksBetweenCommitAndReceive, "looks_between_commit_and_receive")


# faults the workload stage cannot show, so only the scenarios find them: its worlds query no queue monitor view
NOT_IN_WORLDS = {"withheld_counts_as_activated"}
# the stage's worlds never ALTER a queue's PROCEDURE_NAME
NOT_IN_WORLDS |= {"procedure_name_kept"}

VARIANTS = [
    "looks_between_commit_and_receive",
    "first_empty_result_decides",
    "timed_out_wait_still_waits",
    "waiters_on_any_queue_count",
    "idle_time_out_stays_notified",
    "time_out_notifies_while_unread",
    "withheld_counts_as_activated",
    "where_receive_unchecked",
    "unread_count",
    "ignores_max_queue_readers",
    "ignores_where_clause",
    "no_notification_after_time_out",
    "time_out_not_checked",
    "keeps_monitor",
    "checks_only_on_timer",
    "no_rollback_check",
    "rollback_checked_where_messages_came_back",
    "receive_keeps_notification_pending",
    "only_the_maximum_itself_stops",
    "ended_time_out_still_expires",
    "status_ignored",
    "where_ignored",
    "get_conversation_group_takes_the_messages",
    "rollback_serves_no_one",
    "top_fills_from_the_next_group",
    "timed_out_wait_lets_the_group_go",
    "rollback_returns_to_the_back",
    "procedure_name_kept",
    "empty_result_for_the_database",
    "timed_out_wait_is_no_empty_result",
    "max_queue_readers_of_the_database",
    "time_out_of_the_database",
    "any_receive_ends_the_time_out",
]


class _Crashes(ReferenceImplementation):
    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Send) and command.dialog == "D2":
            raise RuntimeError("the implementation fell over")
        return super().execute(command)


def crashes_on_d2() -> ReferenceImplementation:
    """Raises instead of answering when anything is sent on a dialog named D2."""
    return _Crashes(name="crashes on D2")
