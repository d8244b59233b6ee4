"""Brokers that behave differently from the reference where the documents allow it: the suite must pass on each.

Beside the opposite-choices broker (``routing.last_choices``), these differ
in what the documents leave unsaid, so a scenario that fails on one of them
checks more than the documents say. ``test_allowed_behaviours.py`` runs the
whole suite on each.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sbtck import contract
from sbtck.engine import Broker, EngineParams
from sbtck.engine import routing as r
from sbtck.engine.activation_room import ActivatedTask, QueueMonitor
from sbtck.engine.broker import ConnectsWhenNotified
from sbtck.engine.choosing import (
    AFTER_THE_OTHERS,
    AHEAD_GOES_ON,
    ARRIVAL_LOOK,
    ARRIVES_BEHIND,
    AS_ANY_MIRRORED_MEMBER,
    AT_NEXT_USE,
    AT_ONCE_THROUGH_THE_DISPATCHER,
    AT_THE_TRIGGER,
    BEHIND_A_DELETED,
    BROKEN_NOTICED,
    CHECK_MOMENT,
    CHOSEN_AGAIN,
    DELETED_AS,
    FOLLOWS_AT_ONCE,
    FORGOTTEN,
    GCG_READING,
    HELD_ELSEWHERE,
    INSTANCE_BY_INSTANCE,
    LOCAL_MISS,
    LOCAL_PASSED_OVER,
    LOOK_FIRST,
    LOST_PRINCIPAL,
    MATCHED_ON_ITS_OWN,
    MIXED_GROUP,
    NEXT_READER,
    NOT_A_RECEIVE,
    NOT_REPORTED,
    NOTIFICATION_FIRST,
    OF_THE_SERVICE,
    ON_IT_AT_ONCE,
    OWN_ADDRESS,
    PAIR_ASKED_AGAIN,
    PENDING_ON_OPEN,
    PRINCIPAL_RETRY,
    PROBE_SUBJECT,
    READER_FIRST,
    RETRIED_BEHIND,
    SENT_ON,
    STALE,
    STEP_ORDER,
    THE_COMMITTER,
    TIME_OUT_AND_NOTIFICATION,
    TIMER_AND_STEP,
    TIMER_FIRST,
    TIMER_ORDER,
    WAITS_FOR_ITS_TIME_OUT,
    Addresses,
    Chooser,
    FirstChooser,
)
from sbtck.engine.dispatcher import Dispatcher
from sbtck.engine.forwarding import Forwarding
from sbtck.engine.internal_activation import InternalActivation
from sbtck.engine.model import Database, Envelope, Instance, Route
from sbtck.engine.monitor_checks import MonitorChecks
from sbtck.engine.routing_attempt import Routing
from sbtck.engine.transactions import Transactions, Wait
from sbtck.engine.transmission import Transmission
from sbtck.engine.transmission_queue import CONNECTING, DELAYED, FAILED, NO_PRINCIPAL, TransmissionQueue, Waiting
from sbtck.engine.transmitter import Transmitter
from sbtck.engine.transport import Link, NotifiedTransport, Transport
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import ECHOES, FIELDS, Kind, Trigger
from tests.variants.rooms import monitors_with, receiving_with, router_with

# fields some kinds carry, added to every event of the kinds that do not: a minor protocol version may add fields
EXTRA = {"reason": "extra", "rule": "extra", "step": "extra", "trigger": "extra", "task": 99, "route": "extra"}


class _Rewriting(ReferenceImplementation):
    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        return response

    def execute(self, command: contract.Command) -> contract.Response:
        return self.rewrite(command, super().execute(command))


class _ExtraFields(_Rewriting):
    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        events = []
        for event in response.events:
            declared = set(FIELDS[event.kind])
            extra = {k: v for k, v in EXTRA.items() if k not in declared}
            events.append(dataclasses.replace(event, fields={**event.fields, **extra, "note": "extra"}))
        return dataclasses.replace(response, events=events)


class _LowerCaseAddresses(_Rewriting):
    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        if isinstance(command, contract.QueryView) and command.view == "sys.dm_broker_connections":
            rows = [{**row, "address": str(row["address"]).lower()} for row in response.result.get("rows", [])]
            return dataclasses.replace(response, result={**response.result, "rows": rows})
        return response


class _LooksAgainAndFindsTheSame(_Rewriting):
    """Each look that finds activation necessary and starts nothing is followed by another of the same instant that
    finds the same (two messages arrived, the first served to a RECEIVE that waited, say): how many looks find it
    follows the order of the instant's triggers, which ACT-05 does not give."""

    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        events: list[contract.Event] = []
        for event in response.events:
            events.append(event)
            necessary = events[-2] if len(events) > 1 else None
            if event.kind == Kind.ACTIVATION_WITHHELD and necessary and necessary.kind == Kind.ACTIVATION_NECESSARY:
                events += [necessary, event]
        return dataclasses.replace(response, events=events)


class _AcknowledgesEveryMessage(_Rewriting):
    """Acknowledges every message that arrives from the initiator, not only the first."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.first: dict[str, contract.Event] = {}

    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        if isinstance(command, contract.Start):
            self.first.clear()
        events: list[contract.Event] = []
        for event in response.events:
            events.append(event)
            dialog = str(event.fields.get("dialog"))
            if event.kind == Kind.ACKNOWLEDGED and dialog not in self.first:
                self.first[dialog] = event
            elif event.kind == Kind.MESSAGE_ARRIVED and not event.fields.get("from_target") and dialog in self.first:
                events.append(dataclasses.replace(self.first[dialog], at_ms=event.at_ms))
        return dataclasses.replace(response, events=events)


class _ReordersWithinAnInstant(_Rewriting):
    """Reports, at one instant, the second of two events the documents do not order before the first."""

    UNORDERED = ((Kind.PROCEDURE_STARTED, Kind.EVENT_NOTIFICATION), (Kind.ROUTING_REQUESTED, Kind.CONVERSATION_DELAYED))

    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        events = list(response.events)
        for i in range(len(events) - 1):
            first, second = events[i], events[i + 1]
            if first.at_ms == second.at_ms and (first.kind, second.kind) in self.UNORDERED:
                events[i], events[i + 1] = second, first
        return dataclasses.replace(response, events=events)


def extra_fields() -> ReferenceImplementation:
    return _ExtraFields(name="allowed: extra fields on every event")


def lower_case_addresses() -> ReferenceImplementation:
    return _LowerCaseAddresses(name="allowed: addresses shown in lower case")


def looks_again_and_finds_the_same() -> ReferenceImplementation:
    return _LooksAgainAndFindsTheSame(name="allowed: a look again finds activation necessary and withheld")


def acknowledges_every_message() -> ReferenceImplementation:
    return _AcknowledgesEveryMessage(name="allowed: every message acknowledged")


def reorders_within_an_instant() -> ReferenceImplementation:
    return _ReordersWithinAnInstant(name="allowed: unordered events in the other order")


# ---------------------------------------------------------------- the engine's own open choices, taken otherwise
def _engine(name: str, **classes: Any) -> ReferenceImplementation:
    return ReferenceImplementation(broker_class=type(f"{name}Broker", (Broker,), classes), name=f"allowed: {name}")


class _MirrorFirst(Transmission):
    def probe_order(self, route: Route) -> list[str]:
        return [str(route.mirror_address), route.address]


class _AsksTheLostPrincipalAgain(Transmission):
    def after_losing(self, pair: list[str], known: str) -> list[str]:
        return pair


def _identical_named_by_their_last(
    routes: list[Route], instance_has_service: bool, chooser: Chooser
) -> r.Choice | None:
    """RTC-0 makes identical routes one candidate; which of their names it goes by is not said."""
    last = {route.identity(): route for route in sorted(routes, key=lambda route: route.name)}
    named = {route.name: last[route.identity()] for route in routes}
    choice = r.choose(routes, instance_has_service, chooser)
    if choice is None:
        return None
    return r.Choice(choice.step, named[choice.route.name], [named[n].name for n in choice.candidates])


class _IdenticalNamedByTheirLast(Routing):
    choose = staticmethod(_identical_named_by_their_last)


class _CommitterReceivesFirst(FirstChooser):
    """A procedure that commits and RECEIVEs again at once gets its conversation group again before a reader
    that was waiting: the documents say one reader at a time holds a group, not which waiting one gets it next."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return THE_COMMITTER if kind == NEXT_READER else super().choose(kind, options, addresses)


class _ExitCommits(InternalActivation):
    """A procedure that exits inside a transaction has it committed, not rolled back: the contract does not say."""

    def exit_procedure(self, task: ActivatedTask, reason: str) -> None:
        if task.session.in_transaction:
            self.receiving.commit(task.session)
        super().exit_procedure(task, reason)


def exit_commits_the_open_transaction() -> ReferenceImplementation:
    return _engine("an exiting procedure's transaction commits", monitors_class=monitors_with(_ExitCommits))


class _ExitRollsBack(InternalActivation):
    """A procedure that exits inside a transaction has it rolled back, and that rollback is one of a transaction
    that contains a RECEIVE (ACT-05's trigger) whether or not its RECEIVE had returned anything: the monitor looks
    at once, not only at the next timer notification."""

    def exit_procedure(self, task: ActivatedTask, reason: str) -> None:
        in_transaction = task.session.in_transaction
        super().exit_procedure(task, reason)
        if in_transaction:
            self.checks.evaluate(self.queues[task.key], Trigger.ROLLBACK)


def exit_rolls_back_and_looks() -> ReferenceImplementation:
    return _engine(
        "an exiting procedure's transaction rolls back, and the monitor looks",
        monitors_class=monitors_with(_ExitRollsBack),
    )


def probes_the_mirror_first() -> ReferenceImplementation:
    return _engine("probes the mirror address first", router_class=router_with(_MirrorFirst))


def asks_the_lost_principal_again() -> ReferenceImplementation:
    return _engine("asks the lost principal again", router_class=router_with(_AsksTheLostPrincipalAgain))


def names_identical_routes_by_their_last() -> ReferenceImplementation:
    return _engine("names identical routes by their last", router_class=router_with(_IdenticalNamedByTheirLast))


def committer_receives_first() -> ReferenceImplementation:
    return _engine("the committing reader receives first", chooser_class=_CommitterReceivesFirst)


class _GroupIsNoReceive(FirstChooser):
    """GET CONVERSATION GROUP is not a RECEIVE: ACT-05 checks "whenever a RECEIVE executes" and ACT-13 ends the
    time-out "after an application calls RECEIVE", naming RECEIVE alone (ACT-07 names both, and still counts it)."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return NOT_A_RECEIVE if kind == GCG_READING else super().choose(kind, options, addresses)


def get_conversation_group_is_no_receive() -> ReferenceImplementation:
    return _engine("GET CONVERSATION GROUP is no RECEIVE", chooser_class=_GroupIsNoReceive)


class _LooksAtTheTrigger(FirstChooser):
    """A queue monitor looks at the trigger itself, before a waiting reader takes a new message and before other
    sessions of the same instant go on; an activated procedure's commit, the reader it serves and its next
    RECEIVE are one step, looked at when done: ACT-05 says a monitor looks "whenever" one of the events occurs,
    and the documents give concurrent sessions no order."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AT_THE_TRIGGER if kind == CHECK_MOMENT else super().choose(kind, options, addresses)


def looks_at_the_trigger() -> ReferenceImplementation:
    return _engine("a queue monitor looks at the trigger", chooser_class=_LooksAtTheTrigger)


ALLOWED = [
    "extra_fields",
    "lower_case_addresses",
    "acknowledges_every_message",
    "reorders_within_an_instant",
    "probes_the_mirror_first",
    "asks_the_lost_principal_again",
    "names_identical_routes_by_their_last",
    "committer_receives_first",
    "get_conversation_group_is_no_receive",
    "looks_at_the_trigger",
    "exit_commits_the_open_transaction",
    "exit_rolls_back_and_looks",
    "connects_on_the_next_notification",
    "resends_after_4_seconds",
    "resends_after_a_second",
    "resends_after_a_second_connecting_when_notified",
    "receives_the_newest_group",
    "one_task_handler_per_cpu",
    "reclassifies_every_waiting_dialog",
    "exclusive_boundaries",
    "echoes_no_fault",
    "fires_no_bcn_without_clients_nor_reports_failed_restarts",
    "notices_an_unreachable_instance_at_next_use",
    "takes_its_own_address_at_once",
    "takes_its_own_address_through_its_dispatcher",
    "asks_the_pair_again_for_a_principal",
    "delays_where_a_local_route_finds_no_service",
    "looks_again_and_finds_the_same",
    "looks_at_the_timer_before_a_step",
    "resumes_a_failed_dialog_waiting_otherwise",
    "a_group_with_a_mirrored_member_is_mirrored",
    "sends_on_past_a_message_held_elsewhere",
    "connects_when_notified_and_sends_on_past_a_message_held_elsewhere",
    "asks_no_other_dynamic_route_while_a_request_for_the_service_waits",
    "holds_behind_its_own_instance_and_sends_on_past_another",
    "follows_a_deleted_message_at_once",
    "sends_on_and_matches_each_arrival_on_its_own",
    "retries_each_delayed_arrival_on_its_own",
    "notified_before_a_time_out_of_its_instant",
    "asks_the_pair_again_every_7_seconds",
    "chooses_again_past_an_unreported_local_route",
    "lets_a_waiting_reader_take_an_arrival_before_it_looks",
    "looks_at_the_trigger_taking_an_instants_steps_in_another_order",
    "takes_an_instants_steps_in_another_order",
    "forgets_a_lost_principal",
    "deletes_a_stale_message_out_of_order_as_stale",
    "sends_what_waits_on_a_connection_a_send_opens",
    "runs_each_instances_tasks_together",
    "looks_at_an_arrival_before_the_reader_it_served",
    "asks_a_partner_about_the_routes_service",
]


def connects_on_the_next_notification() -> ReferenceImplementation:
    """PER-2A read literally: the transport connects when notified; a waiting message goes where it was routed."""
    return ReferenceImplementation(broker_class=ConnectsWhenNotified, name="connects on the next 2nd notification")


# ---------------------------------------------------------------- sending again what has not arrived
class _Resends(Transmission):
    """Sends a message again while it has not arrived: after ``first_ms``, then twice as long each time, up to 64 s.

    What SQL Server does with a message no acknowledgement came for; the documents only speak of cleaning up
    acknowledged messages (PER-5E), and say nothing of when a message is sent again.
    """

    arrived: set[tuple[str, bool, int]]
    first_ms = 4_000

    def _transmit(self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None) -> None:
        self._send(env, at, address, inside, home, self.first_ms)

    def _send(
        self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None, wait_ms: int
    ) -> None:
        kept = dataclasses.replace(env)  # as it leaves: a forwarder changes the one it holds
        before = len(self.log.events)
        super()._transmit(env, at, address, inside, home)
        sent = any(e["kind"] == Kind.MESSAGE_TRANSMITTED for e in self.log.events[before:])
        if inside and sent:  # the sender resends; a forwarder keeps no copy
            self.clock.at(self.clock.now_ms + wait_ms, lambda: self._again(kept, at, address, home, wait_ms))

    def _again(self, kept: Envelope, at: Instance, address: str | None, home: str | None, wait_ms: int) -> None:
        if (kept.dialog, kept.from_target, kept.sequence) not in self.arrived:
            self._send(dataclasses.replace(kept), at, address, True, home, min(2 * wait_ms, RESEND_LAST_MS))


class _DropsCopies(Dispatcher):
    """A copy of a message already saved or buffered is dropped as it comes in: the dispatcher "validates" what
    it receives (PER-1C), and the suite does not accept a dispatcher that buffers the same message twice."""

    def receive(self, env: Envelope, db: Database) -> None:
        key = (env.dialog, env.from_target)
        held = {b.envelope.sequence for b in self.buffers.get(key, [])}
        if env.sequence < self.expected(*key) or env.sequence in held:
            return
        super().receive(env, db)


class _ResendsBroker(Broker):
    router_class = router_with(_Resends)
    dispatcher_class = _DropsCopies

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrived: set[tuple[str, bool, int]] = set()
        self.router.transmission.arrived = self.arrived  # type: ignore[attr-defined]

    def deliver(self, env: Envelope, at: Instance, db: Database) -> None:
        if (env.dialog, env.from_target, env.sequence) in self.arrived:
            return
        self.arrived.add((env.dialog, env.from_target, env.sequence))
        super().deliver(env, at, db)


RESEND_LAST_MS = 64_000


class _DeclaresResending(ReferenceImplementation):
    """Resends as its broker does, written here apart from the engine's resending, and declares after how long
    (``resend_after_s``), as an implementation that resends does."""

    def __init__(self, first_ms: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.first_ms = first_ms

    def handshake(self) -> contract.Handshake:
        base = super().handshake()
        return dataclasses.replace(base, params={**base.params, "resend_after_s": self.first_ms / 1000})


def _resending(first_ms: int) -> ReferenceImplementation:
    router = router_with(type("Resends", (_Resends,), {"first_ms": first_ms}))
    broker = type("ResendsBroker", (_ResendsBroker,), {"router_class": router})
    return _DeclaresResending(first_ms, broker_class=broker, name=f"allowed: resends after {first_ms} ms")


def resends_after_4_seconds() -> ReferenceImplementation:
    return _resending(4_000)


def resends_after_a_second() -> ReferenceImplementation:
    return _resending(1_000)


class _ResendsAfterASecond(_Resends):
    first_ms = 1_000


class _SendsWhereRoutedResending(Transmitter):
    """SendsWhereRouted's choice (a waiting message goes where it was routed) for a resending router. Written
    here rather than taken from the engine: it goes on with the first of the line, wherever the message stood."""

    def once_connected(self, head: Waiting) -> None:
        queue = self.queue
        key = (head.envelope.dialog, head.envelope.from_target)
        line = queue.lines[key]
        line.pop(0)
        queue._retrying = head.envelope
        try:
            self.transmission._transmit(
                head.envelope, self.instances[head.instance], head.address, head.inside, head.home
            )
        finally:
            queue._retrying = None
        if line and line[0].envelope is not head.envelope:
            queue._retry(line[0])
        elif not line:
            queue.lines.pop(key, None)


_ResendsWhereRouted = router_with(_ResendsAfterASecond, _SendsWhereRoutedResending)


def resends_after_a_second_connecting_when_notified() -> ReferenceImplementation:
    """A forwarder passes on every copy it receives: resent copies reach it before the acknowledgement is back."""
    broker = type(
        "ResendsWhenNotifiedBroker",
        (_ResendsBroker,),
        {"router_class": _ResendsWhereRouted, "transport_class": NotifiedTransport},
    )
    return _DeclaresResending(1_000, broker_class=broker, name="allowed: resends after 1000 ms, connects when notified")


# ---------------------------------------------------------------- readings of the documents the reference did not take
class _NewestGroupFirst(Transactions):
    """RECEIVE without WHERE takes the group of the newest ready message: the documents do not say which group."""

    def pick_group(self, wait: Wait) -> str | None:
        for message in reversed(self.queues[wait.queue].messages):
            owner = self.locks.get((wait.queue, message.group))
            if self.matches(wait, message) and (owner is None or owner is wait.session):
                return message.group
        return None


def receives_the_newest_group() -> ReferenceImplementation:
    return _engine("RECEIVE takes the newest group", receiving_class=receiving_with(_NewestGroupFirst))


def one_task_handler_per_cpu() -> ReferenceImplementation:
    """ "creates up to 2 times the number of CPU's task-handlers" (PER-1B): one per CPU is within it."""
    params = dataclasses.replace(EngineParams.reference(), task_handlers_per_cpu=1)
    return ReferenceImplementation(params=params, name="allowed: one task handler per CPU")


class _ReclassifiesEveryWaitingDialog(Transmitter):
    """After a metadata change the transmitter "reclassifies all or selected dialogs" (PER-2B): here every dialog
    of the instance it holds waiting to be sent, not only those waiting since before the change."""

    def reclassify(self, instance: str) -> None:
        since = self.last_reclassified_ms.get(instance, -1)
        self.last_reclassified_ms[instance] = self.clock.now_ms
        changed = self.metadata_changed.pop(instance, 0)
        heads = self.queue.heads(DELAYED, CONNECTING, NO_PRINCIPAL, FAILED, instance=instance)
        held = (CONNECTING, NO_PRINCIPAL)
        chosen = [
            h for h in heads if h.status == FAILED or h.order < changed or (changed and h.inside and h.status in held)
        ]
        if len(chosen) < len(heads) and self._expired_since(instance, since):
            chosen = heads
        dialogs = [h.envelope.dialog for h in chosen]
        self.log.add(
            {
                "instance": instance,
                "dialogs": dialogs,
                "at_ms": self.clock.now_ms,
                "kind": Kind.TRANSMITTER_RECLASSIFIED,
            }
        )
        for head in chosen:
            self._resume(head.envelope.dialog, instance)
            self.queue._retry(head)


class _ResumesAFailedDialogWaitingOtherwise(Transmitter):
    """A dialog the transmission fault found waiting for its connection, principal or route has failed too (PER-2B
    resumes dialogs "that failed earlier for resource or security reasons"): the next reclassification resumes it."""

    def _failed_waiting_otherwise(self, head: Waiting, instance: str) -> bool:
        return head.status != FAILED and instance in self.failed_at.get(head.envelope.dialog, ())


def resumes_a_failed_dialog_waiting_otherwise() -> ReferenceImplementation:
    return _engine(
        "resumes a failed dialog waiting otherwise", router_class=router_with(_ResumesAFailedDialogWaitingOtherwise)
    )


def reclassifies_every_waiting_dialog() -> ReferenceImplementation:
    return _engine("reclassifies every waiting dialog", router_class=router_with(_ReclassifiesEveryWaitingDialog))


# A span "for 15 seconds", "in 10 seconds", "for the past 90 seconds", "within 60 seconds" or "for a few seconds"
# that ends exactly at a check: the documents do not say whether that last instant counts. These take it as
# not yet passed, the reference as passed; each shifts the instant it measures from by a millisecond.
class _ExclusiveTransport(Transport):
    def suppressed(self, link: Link) -> bool:
        return self.clock.now_ms <= self.suppressed_until.get(link, 0)

    def close_idle(self, only: str | None = None) -> None:
        for conn in self.connections.values():
            conn.last_activity_ms += 1
        try:
            super().close_idle(only)
        finally:
            for conn in self.connections.values():
                conn.last_activity_ms -= 1


class _ExclusiveDispatcher(Dispatcher):
    def sweep(self) -> None:
        items = [item for line in self.buffers.values() for item in line]
        for item in items:
            item.arrived_ms += 1
        try:
            super().sweep()
        finally:
            for item in items:
                item.arrived_ms -= 1


class _ExclusiveForwarding(Forwarding):
    def forget_stale_forwarded(self, only: str | None = None) -> None:
        held = [w for line in self.queue.lines.values() for w in line if not w.inside]
        for waiting in held:
            waiting.received_ms += 1
        try:
            super().forget_stale_forwarded(only)
        finally:
            for waiting in held:
                waiting.received_ms -= 1


class _ExclusiveMonitors(MonitorChecks):
    def quiet(self, monitor: QueueMonitor) -> bool:
        if monitor.last_empty_ms is None:
            return True
        return self.clock.now_ms - monitor.last_empty_ms > self.params.activation_empty_window_s * 1000


def exclusive_boundaries() -> ReferenceImplementation:
    return _engine(
        "the last instant of a span does not count",
        transport_class=_ExclusiveTransport,
        dispatcher_class=_ExclusiveDispatcher,
        router_class=router_with(_ExclusiveForwarding),
        monitors_class=monitors_with(_ExclusiveMonitors),
    )


class _Dropping(_Rewriting):
    def drops(self, event: contract.Event) -> bool:
        return False

    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        return dataclasses.replace(response, events=[e for e in response.events if not self.drops(e)])


class _EchoesNoFault(_Dropping):
    """Reports nothing of the faults the kit made: the kit knows when it made them."""

    def drops(self, event: contract.Event) -> bool:
        return event.kind in ECHOES


def echoes_no_fault() -> ReferenceImplementation:
    return _EchoesNoFault(name="allowed: no echo of the kit's faults")


class _QuietAboutNotices(_Dropping):
    """Fires no Broker Configuration Notification, having no BCN clients (PER-5D fires it "for BCN clients"), and
    reports a database's broker failing to start only the first time, not each failed attempt after (PER-5C)."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.failed: set[tuple[object, object]] = set()

    def drops(self, event: contract.Event) -> bool:
        if event.kind == Kind.BROKER_CONFIGURATION_NOTIFICATION:
            return True
        if event.kind == Kind.DATABASE_BROKER_START_FAILED:
            key = (event.fields.get("instance"), event.fields.get("database"))
            again = key in self.failed
            self.failed.add(key)
            return again
        return False

    def rewrite(self, command: contract.Command, response: contract.Response) -> contract.Response:
        if isinstance(command, contract.Start):
            self.failed.clear()
        return super().rewrite(command, response)


def fires_no_bcn_without_clients_nor_reports_failed_restarts() -> ReferenceImplementation:
    return _QuietAboutNotices(name="allowed: no BCN without clients, failed restarts unreported")


class _NoticesAtNextUse(FirstChooser):
    """A connection to an instance the network lost is found broken when it is next used, as TCP finds it,
    not at once: the kit's own network fault does not say when the broker notices (PER-2A)."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AT_NEXT_USE if kind == BROKEN_NOTICED else super().choose(kind, options, addresses)


def notices_an_unreachable_instance_at_next_use() -> ReferenceImplementation:
    return _engine("notices a lost connection at its next use", chooser_class=_NoticesAtNextUse)


class _TakesItsOwnAddressAtOnce(Transmission):
    """A route whose address resolves to this instance: the message is taken as arriving from outside (RTX-2)
    without going out over the network and back."""

    def _transmit(self, env: Envelope, at: Instance, address: str | None, inside: bool, home: str | None) -> None:
        target = self.by_address(address) if address else None
        if target is at and not (inside and env.dialog in self.transmitter.failed):
            self.routing.route(env, at, inside=False, home=None, via_transport=False)
            return
        super()._transmit(env, at, address, inside, home)


def takes_its_own_address_at_once() -> ReferenceImplementation:
    return _engine("takes a route to its own address at once", router_class=router_with(_TakesItsOwnAddressAtOnce))


class _ThroughItsOwnDispatcher(FirstChooser):
    """A route whose address resolves to this instance: the message is taken at once, and as a message from
    outside comes, through the instance's message dispatcher (which "receives messages from the SSB transport")."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AT_ONCE_THROUGH_THE_DISPATCHER if kind == OWN_ADDRESS else super().choose(kind, options, addresses)


class _AsksThePairAgain(FirstChooser):
    """A message waiting for a mirrored route's principal: RTR-5's retry asks the two addresses of the route it
    chose again ("ambos os endereços são tentados novamente"), without matching and choosing a route again."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return PAIR_ASKED_AGAIN if kind == PRINCIPAL_RETRY else super().choose(kind, options, addresses)


def asks_the_pair_again_for_a_principal() -> ReferenceImplementation:
    return _engine("asks a mirrored route's pair again for its principal", chooser_class=_AsksThePairAgain)


def takes_its_own_address_through_its_dispatcher() -> ReferenceImplementation:
    return _engine(
        "takes a route to its own address at once, through its dispatcher", chooser_class=_ThroughItsOwnDispatcher
    )


class _ChoosesAgainWhereLocalFindsNoService(FirstChooser):
    """A LOCAL route chosen, and the service not in this instance (or not in the database of the broker instance
    named): the routing document says Service Broker "may return to step 2 and choose another route"; with no other
    route matched, none is found, and "failure to find a matching route is not considered an error": the
    conversation is delayed and matched again after the time-out, never dropped."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return CHOSEN_AGAIN if kind == LOCAL_MISS else super().choose(kind, options, addresses)


def delays_where_a_local_route_finds_no_service() -> ReferenceImplementation:
    return _engine("delays where a LOCAL route finds no service", chooser_class=_ChoosesAgainWhereLocalFindsNoService)


class _PassesOverALocalRouteUnreported(_ChoosesAgainWhereLocalFindsNoService):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return NOT_REPORTED if kind == LOCAL_PASSED_OVER else super().choose(kind, options, addresses)


def chooses_again_past_an_unreported_local_route() -> ReferenceImplementation:
    """As delays_where_a_local_route_finds_no_service, and the LOCAL route it returns from is not reported as
    chosen: route_chosen names only the route the message goes by."""
    return _engine("chooses again past an unreported LOCAL route", chooser_class=_PassesOverALocalRouteUnreported)


class _TimerBeforeTheStep(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return TIMER_FIRST if kind == TIMER_AND_STEP else super().choose(kind, options, addresses)


def looks_at_the_timer_before_a_step() -> ReferenceImplementation:
    """A timer notification and an activated procedure's step of one instant: the monitor's look comes first."""
    return _engine("a timer notification's look before a procedure's step", chooser_class=_TimerBeforeTheStep)


class _ForgetsALostPrincipal(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return FORGOTTEN if kind == LOST_PRINCIPAL else super().choose(kind, options, addresses)


def forgets_a_lost_principal() -> ReferenceImplementation:
    """A mirrored route whose principal is lost (RTR-4) forgets it: its next message or retry asks both addresses
    anew, as at first use, instead of taking the lost one for the principal until the partner claims the role."""
    return _engine("forgets a lost principal", chooser_class=_ForgetsALostPrincipal)


class _DeletesAsStale(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return STALE if kind == DELETED_AS else super().choose(kind, options, addresses)


def deletes_a_stale_message_out_of_order_as_stale() -> ReferenceImplementation:
    """A buffered message both out of order and stale is deleted as stale (PER-1C gives neither reason first)."""
    return _engine("deletes a stale message out of order as stale", chooser_class=_DeletesAsStale)


class _EachInstancesTasksTogether(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return INSTANCE_BY_INSTANCE if kind == TIMER_ORDER else super().choose(kind, options, addresses)


def runs_each_instances_tasks_together() -> ReferenceImplementation:
    """Where the instances' timer notifications fall on one instant, each instance runs all its periodic tasks
    before the next instance runs any (each has its own timer; the documents order neither)."""
    return _engine("runs each instance's periodic tasks together", chooser_class=_EachInstancesTasksTogether)


class _SendsOnAConnectionOnceOpen(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return ON_IT_AT_ONCE if kind == PENDING_ON_OPEN else super().choose(kind, options, addresses)


def sends_what_waits_on_a_connection_a_send_opens() -> ReferenceImplementation:
    """Messages waiting for a connection go on it as soon as another message's SEND opens it, not only once the
    transmitter is next notified (PER-2A: "once notified" it connects to destinations with pending messages)."""
    return _engine("sends what waits on a connection a SEND opens", chooser_class=_SendsOnAConnectionOnceOpen)


class _AnyMirroredMemberMirrors(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AS_ANY_MIRRORED_MEMBER if kind == MIXED_GROUP else super().choose(kind, options, addresses)


def a_group_with_a_mirrored_member_is_mirrored() -> ReferenceImplementation:
    """A group of identical routes specifies a mirror address (RTC-1) when any of its members does."""
    return _engine("a group of identical routes mirrored by any member", chooser_class=_AnyMirroredMemberMirrors)


class _SendsOnPastAMessageHeldElsewhere(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return SENT_ON if kind == HELD_ELSEWHERE else super().choose(kind, options, addresses)


def sends_on_past_a_message_held_elsewhere() -> ReferenceImplementation:
    """A message SENT while an earlier one of its conversation waits at another instance only is routed and sent
    on; it waits behind that message where it finds it waiting."""
    return _engine("sends on past a message held elsewhere", chooser_class=_SendsOnPastAMessageHeldElsewhere)


class _PendingForTheService(Routing):
    """RTM-4's "nenhuma solicitação pendente para a rota do serviço" read as a request pending for a route for the
    conversation's service, whichever dynamic route it went by: while one is, step 4 asks no other."""

    def match(
        self,
        routes: list[Route],
        service: str,
        broker: str | None,
        pending: set[tuple[str, str]],
        has_service: bool,
        chooser: Chooser,
    ) -> r.Match:
        if any(asked == service for _, asked in pending):
            pending = pending | {(x.name, service) for x in routes if x.dynamic}
        return r.match(routes, service, broker, pending, has_service, chooser)


def asks_no_other_dynamic_route_while_a_request_for_the_service_waits() -> ReferenceImplementation:
    return _engine(
        "asks no other dynamic route while a request for the service waits",
        router_class=router_with(_PendingForTheService),
    )


def connects_when_notified_and_sends_on_past_a_message_held_elsewhere() -> ReferenceImplementation:
    """Both of the above at once: a message waiting for its connection goes where it was routed when notified,
    and one held behind it, once it waits at another instance, is routed and sent on (cr15's D1, stop 61)."""
    return ReferenceImplementation(
        broker_class=ConnectsWhenNotified,
        chooser=_SendsOnPastAMessageHeldElsewhere(),
        name="allowed: connects when notified, sends on past a message held elsewhere",
    )


class _HoldsOnlyBehindItsOwnInstance(TransmissionQueue):
    def _sends_on(self, env: Envelope, instance: str) -> bool:
        # held where the earlier message waits at this very instance (handled as from outside, RTX-2); sent on
        # past one at another instance: the reading is the broker's, message by message
        line = self.lines.get((env.dialog, env.from_target), [])
        if any(w.place == (instance, False) for w in line):
            return False
        self.any_sent_on = True
        return True


def holds_behind_its_own_instance_and_sends_on_past_another() -> ReferenceImplementation:
    """HELD_ELSEWHERE taken message by message: a message SENT while an earlier one of its conversation waits at
    this instance as from outside (RTX-2) is held behind it; one SENT while it waits at another instance only is
    routed and sent on to wait behind it there."""
    return _engine(
        "holds behind its own instance, sends on past another",
        router_class=router_with(_HoldsOnlyBehindItsOwnInstance),
    )


class _FollowsADeletedMessageAtOnce(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return FOLLOWS_AT_ONCE if kind == BEHIND_A_DELETED else super().choose(kind, options, addresses)


def follows_a_deleted_message_at_once() -> ReferenceImplementation:
    """A message waiting behind an earlier one of its conversation that the forwarder deletes (PER-5B) goes on at
    once, as it would had that one gone on, where the reference leaves it waiting."""
    return _engine("follows a deleted message at once", chooser_class=_FollowsADeletedMessageAtOnce)


class _SendsOnAndMatchesEachArrival(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        if kind == HELD_ELSEWHERE:
            return SENT_ON
        return MATCHED_ON_ITS_OWN if kind == ARRIVES_BEHIND else super().choose(kind, options, addresses)


def sends_on_and_matches_each_arrival_on_its_own() -> ReferenceImplementation:
    """Sent on past a message held elsewhere, a later message arriving where it waits is matched on its own, as
    any arrival is, and waits in line there only if it finds no way either."""
    return _engine("sends on, and matches each arrival on its own", chooser_class=_SendsOnAndMatchesEachArrival)


class _RetriesEachDelayedArrival(_SendsOnAndMatchesEachArrival):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        if kind == AHEAD_GOES_ON:
            return WAITS_FOR_ITS_TIME_OUT
        return MATCHED_ON_ITS_OWN if kind == RETRIED_BEHIND else super().choose(kind, options, addresses)


def retries_each_delayed_arrival_on_its_own() -> ReferenceImplementation:
    """As sends_on_and_matches_each_arrival_on_its_own, and a later message delayed by its own matching where an
    earlier one of its conversation waits is matched again at its own time-out, and only then: not when that one
    goes on."""
    return _engine("retries each delayed arrival on its own", chooser_class=_RetriesEachDelayedArrival)


class _NotifiedBeforeATimeOut(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        if kind == TIME_OUT_AND_NOTIFICATION:
            return NOTIFICATION_FIRST
        return super().choose(kind, options, addresses)


def notified_before_a_time_out_of_its_instant() -> ReferenceImplementation:
    """Where a delayed message's time-out and its instance's 2nd timer notification fall on one instant, the
    notification comes first: its reclassification finds the message still waiting, and may name it."""
    return _engine("notified before a time-out of its instant", chooser_class=_NotifiedBeforeATimeOut)


class _DeclaresPrincipalRetry(ReferenceImplementation):
    """Asks both addresses of a mirrored route again on a period of its own, and declares it
    (``principal_retry_s``), as an implementation that does so does."""

    def handshake(self) -> contract.Handshake:
        base = super().handshake()
        return dataclasses.replace(base, params={**base.params, "principal_retry_s": self.params.principal_retry_s})


def asks_the_pair_again_every_7_seconds() -> ReferenceImplementation:
    """RTR-5 names no period for trying both addresses again: here 7 seconds after the last asking, not at the
    2nd timer notifications."""
    params = dataclasses.replace(EngineParams.reference(), principal_retry_s=7)
    return _DeclaresPrincipalRetry(params=params, name="allowed: asks the pair again every 7 seconds")


class _ReaderBeforeTheLook(_LooksAtTheTrigger):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return READER_FIRST if kind == ARRIVAL_LOOK else super().choose(kind, options, addresses)


class _ArrivalLookedAtFirst(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return LOOK_FIRST if kind == ARRIVAL_LOOK else super().choose(kind, options, addresses)


def looks_at_an_arrival_before_the_reader_it_served() -> ReferenceImplementation:
    """A queue monitor that looks once the instant has settled, where a message arrives for a waiting reader (or a
    rollback returns one): the look at the arrival comes before the look at that reader's RECEIVE, so that ACT-06
    starts the first procedure and ACT-07 the second, where the reference names ACT-07 twice. ACT-05 has the monitor
    look "whenever" either happens and gives the looks of one instant no order (a tenth clean-room author's
    reading)."""
    return _engine("looks at an arrival before the reader it served", chooser_class=_ArrivalLookedAtFirst)


class _AsksAboutTheService(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return OF_THE_SERVICE if kind == PROBE_SUBJECT else super().choose(kind, options, addresses)


def asks_a_partner_about_the_routes_service() -> ReferenceImplementation:
    """Where a mirrored route names no broker instance, asks each address whether it holds the principal copy of the
    route's service's database, whatever broker instance the conversation names: RTR-2 sends "uma solicitação para
    ambos os endereços para determinar qual instância é atualmente a principal" and says nothing of what the request
    names (a tenth clean-room author's reading; the message then goes there, and RTL-2 drops it)."""
    return _engine("asks a partner about the route's service", chooser_class=_AsksAboutTheService)


def lets_a_waiting_reader_take_an_arrival_before_it_looks() -> ReferenceImplementation:
    """A queue monitor that looks at the trigger, where a reader waits for the message that arrives (or that a
    rollback returned): the reader takes it first, and the monitor looks at that RECEIVE, then at the arrival. ACT-05
    has the monitor look "whenever" the message arrives; the documents give the waiting session no order against it
    (a fifth clean-room author's reading)."""
    return _engine("a waiting reader before the monitor's look at an arrival", chooser_class=_ReaderBeforeTheLook)


class _StepsAfterTheOthersOnceSettled(FirstChooser):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AFTER_THE_OTHERS if kind == STEP_ORDER else super().choose(kind, options, addresses)


def takes_an_instants_steps_in_another_order() -> ReferenceImplementation:
    """Activated procedures whose work ends at one instant take their steps (commit, RECEIVE again) each after the
    others, where the monitor looks once the instant has settled: the documents give concurrent sessions no order (a
    ninth clean-room author's D2, world 871 of all three areas)."""
    return _engine("takes an instant's steps in another order", chooser_class=_StepsAfterTheOthersOnceSettled)


class _StepsAfterTheOthers(_LooksAtTheTrigger):
    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return AFTER_THE_OTHERS if kind == STEP_ORDER else super().choose(kind, options, addresses)


def looks_at_the_trigger_taking_an_instants_steps_in_another_order() -> ReferenceImplementation:
    """A queue monitor that looks at the trigger, where procedures of a queue end their work at one instant: each
    step goes after the others, so they come in another order than the reference's, each looked at when done. The
    documents give concurrent sessions no order (a fifth clean-room author's order)."""
    return _engine("an instant's procedure steps in another order", chooser_class=_StepsAfterTheOthers)
