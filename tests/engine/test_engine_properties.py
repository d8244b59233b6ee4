"""Hypothesis drives the engine at random and checks what must always hold.

No message is lost or duplicated, each conversation's messages are
committed in order, a conversation group is never held by two readers, and
no procedure starts at or above MAX_QUEUE_READERS.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sbtck.contract import Event
from sbtck.engine import Broker, views
from sbtck.engine.model import Message
from sbtck.engine.receiving import Receiving
from sbtck.engine.transactions import Session, Transactions, Wait
from sbtck.observations import Kind
from tests.engine.world import SERVICES, broker, key
from tests.helpers import assert_machine_fails
from tests.variants.rooms import monitors_with, receiving_with

QUEUES = ("Manual", "Busy", "Quick")
SESSIONS = ("S1", "S2", "S3")
Msg = tuple[str, int]


class BrokerMachine(RuleBasedStateMachine):
    broker_class: type[Broker] = Broker

    @initialize()
    def start(self) -> None:
        self.b = broker(self.broker_class)
        self.now = 0
        self.dialogs: list[str] = []
        self.sent: Counter[Msg] = Counter()
        self.in_txn = dict.fromkeys(SESSIONS, False)
        self.waiting = dict.fromkeys(SESSIONS, False)
        self.pending: dict[str, list[Msg]] = {}
        self.committed: list[Msg] = []
        self.running = dict.fromkeys(QUEUES, 0)
        self.max_readers = {"Manual": 0, "Busy": 2, "Quick": 3}
        self._absorb()

    # ------------------------------------------------------------- actions
    @precondition(lambda self: len(self.dialogs) < 6)
    @rule(service=st.sampled_from(SERVICES))
    def begin_dialog(self, service: str) -> None:
        dialog = f"D{len(self.dialogs) + 1}"
        self.b.begin_dialog(self.now, dialog, "sql1", "shop", "Initiator", service)
        self.dialogs.append(dialog)
        self._absorb()

    @precondition(lambda self: self.dialogs)
    @rule(data=st.data(), count=st.integers(1, 4))
    def send(self, data: st.DataObject, count: int) -> None:
        dialog = data.draw(st.sampled_from(self.dialogs))
        for _ in range(count):
            seq = self.b.send(self.now, dialog)["message_sequence_number"]
            self.sent[(dialog, seq)] += 1
            self._absorb()

    @rule(
        session=st.sampled_from(SESSIONS),
        queue=st.sampled_from(QUEUES),
        top=st.sampled_from([None, 1, 2]),
        wait=st.sampled_from([None, 0, 2000, 9000]),
        where=st.booleans(),
        data=st.data(),
    )
    def receive(
        self, session: str, queue: str, top: int | None, wait: int | None, where: bool, data: st.DataObject
    ) -> None:
        if self.waiting[session]:
            return
        where_dialog = data.draw(st.sampled_from(self.dialogs)) if where and self.dialogs else None
        self.b.receive(self.now, session, key(queue), top=top, where_dialog=where_dialog, waitfor_ms=wait)
        self._absorb()

    @rule(session=st.sampled_from(SESSIONS))
    def begin_transaction(self, session: str) -> None:
        if not self.in_txn[session]:
            self.b.begin_transaction(self.now, session)
            self.in_txn[session] = True

    @rule(session=st.sampled_from(SESSIONS), commit=st.booleans())
    def end_transaction(self, session: str, commit: bool) -> None:
        if self.in_txn[session] and not self.waiting[session]:
            (self.b.commit if commit else self.b.rollback)(self.now, session)
            self.in_txn[session] = False
            self._absorb()

    @rule(ms=st.integers(0, 15_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.b.advance(self.now)
        self._absorb()

    @rule(queue=st.sampled_from(("Busy", "Quick")), readers=st.integers(0, 3))
    def alter_max_queue_readers(self, queue: str, readers: int) -> None:
        self.b.alter_queue(self.now, key(queue), max_queue_readers=readers)
        self.max_readers[queue] = readers
        self._absorb()

    @rule(data=st.data())
    def a_procedure_exits(self, data: st.DataObject) -> None:
        tasks = views.dm_broker_activated_tasks(self.b)
        if tasks:
            task = data.draw(st.sampled_from(tasks))
            self.b.exit_procedure(self.now, key(task["queue"]), task["task"])
            self._absorb()

    # ----------------------------------------------------------- bookkeeping
    def _txn(self, session: str) -> bool:
        return "#" in session or self.in_txn[session]  # activated procedures always RECEIVE in a transaction

    def _absorb(self) -> None:
        for event in self.b.drain_events():
            self._absorb_one(event)

    def _absorb_one(self, e: Event) -> None:
        session = e.fields.get("session", "")
        if e.kind == Kind.ROWS_RETURNED:
            rows = [(r["dialog"], r["message_sequence_number"]) for r in e.fields.get("rows", [])]
            if self._txn(session):
                self.pending.setdefault(session, []).extend(rows)
            else:
                self.committed.extend(rows)
        elif e.kind == Kind.TRANSACTION_COMMITTED:
            self.committed.extend(self.pending.pop(session, []))
        elif e.kind == Kind.TRANSACTION_ROLLED_BACK:
            self.pending.pop(session, None)
        elif e.kind == Kind.PROCEDURE_STARTED:
            queue = e.fields["queue"]
            assert self.running[queue] < self.max_readers[queue], f"procedure started at MAX_QUEUE_READERS: {e}"
            self.running[queue] += 1
        elif e.kind == Kind.PROCEDURE_EXITED:
            self.running[e.fields["queue"]] -= 1
        if session in self.waiting:
            if e.kind == Kind.READER_WAITING:
                self.waiting[session] = True
            elif e.kind in (Kind.ROWS_RETURNED, Kind.EMPTY_RESULT):
                self.waiting[session] = False

    # ------------------------------------------------------------ invariants
    @invariant()
    def no_message_lost_or_duplicated(self) -> None:
        queued = [(m.dialog, m.sequence) for q in self.b.queues.values() for m in q.messages]
        in_flight = [m for rows in self.pending.values() for m in rows]
        everywhere = Counter(queued) + Counter(in_flight) + Counter(self.committed)
        assert everywhere == self.sent

    @invariant()
    def each_conversation_is_committed_in_order(self) -> None:
        for dialog in self.dialogs:
            seqs = [s for d, s in self.committed if d == dialog]
            assert seqs == list(range(len(seqs))), f"{dialog} committed out of order: {seqs}"

    @invariant()
    def a_group_is_held_by_one_reader(self) -> None:
        holders: dict[object, str] = {}
        for name, session in self.b.sessions.items():
            for lock in session.locks:
                assert lock not in holders, f"{lock} held by {holders[lock]} and {name}"
                holders[lock] = name
                assert self.b.receiving.transactions.locks.get(lock) is session, f"{name} holds {lock} the broker lost"

    @invariant()
    def running_procedures_match_the_view(self) -> None:
        seen = Counter(t["queue"] for t in views.dm_broker_activated_tasks(self.b))
        assert {q: seen.get(q, 0) for q in QUEUES} == self.running


BrokerMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestBroker = BrokerMachine.TestCase


class _LocksIgnored(Transactions):
    def pick_group(self, wait: Wait) -> str | None:
        return next((m.group for m in self.queues[wait.queue].messages if self.matches(wait, m)), None)


_IgnoresLocks = receiving_with(_LocksIgnored)


class _LosesOnRollback(Receiving):
    def rollback(self, session: Session) -> None:
        session.received.clear()
        super().rollback(session)


class _Duplicates(Receiving):
    def _finish(self, wait: Wait, rows: list[Message], group: str | None) -> None:
        if rows and wait.top is None:
            self.queues[wait.queue].messages.insert(0, rows[-1])
        super()._finish(wait, rows, group)


def _machine(name: str, **attrs: object) -> type[BrokerMachine]:
    wrong = type(f"{name}Broker", (Broker,), attrs)
    return type(f"{name}Machine", (BrokerMachine,), {"broker_class": wrong})


@pytest.mark.parametrize(
    "machine",
    [
        _machine("IgnoresLocks", receiving_class=_IgnoresLocks),
        _machine("LosesOnRollback", receiving_class=_LosesOnRollback),
        _machine("Duplicates", receiving_class=_Duplicates),
        _machine(
            "IgnoresMax",
            monitors_class=monitors_with(
                __import__("tests.variants.activation", fromlist=["x"])._IgnoresMaxQueueReaders
            ),
        ),
    ],
    ids=lambda m: m.__name__,
)
def test_the_properties_catch_a_wrong_engine(machine: type[BrokerMachine]) -> None:
    assert_machine_fails(machine)
