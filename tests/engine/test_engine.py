"""The reference engine's RECEIVE, locking and transactions, called directly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sbtck import catalogue
from sbtck.engine.broker import Broker
from sbtck.engine.choosing import WAITER, FirstChooser, LastChooser
from sbtck.engine.clockwork import Clockwork
from sbtck.errors import BrokerError
from sbtck.observations import Kind
from sbtck.workloads.differential import FollowingChooser
from tests.engine.world import broker, key

ENGINE = Path(__file__).resolve().parents[2] / "engine"


def _seqs(outcome: dict[str, object]) -> list[tuple[str, int]]:
    rows = outcome.get("rows") or []
    assert isinstance(rows, list)
    return [(r["dialog"], r["message_sequence_number"]) for r in rows]


def test_receive_returns_one_group_in_order_and_top_limits_it() -> None:
    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    b.begin_dialog(0, "D2", "sql1", "shop", "Initiator", "ManualService")
    for dialog in ("D1", "D2", "D1", "D1"):
        b.send(0, dialog)
    assert _seqs(b.receive(0, "S1", key("Manual"), top=2)) == [("D1", 0), ("D1", 1)]
    # the group whose oldest message was queued first comes next
    assert _seqs(b.receive(0, "S1", key("Manual"))) == [("D2", 0)]
    assert _seqs(b.receive(0, "S1", key("Manual"))) == [("D1", 2)]
    assert b.receive(0, "S1", key("Manual"))["status"] == "empty"


def test_a_locked_group_is_skipped_and_rollback_returns_messages_in_order() -> None:
    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    b.begin_dialog(0, "D2", "sql1", "shop", "Initiator", "ManualService")
    for dialog in ("D1", "D1", "D2"):
        b.send(0, dialog)
    b.begin_transaction(0, "S1")
    assert _seqs(b.receive(0, "S1", key("Manual"), top=1)) == [("D1", 0)]
    assert _seqs(b.receive(0, "S2", key("Manual"))) == [("D2", 0)]
    assert b.receive(0, "S2", key("Manual"))["status"] == "empty"
    assert _seqs(b.receive(0, "S1", key("Manual"))) == [("D1", 1)]
    b.rollback(1, "S1")
    assert _seqs(b.receive(1, "S2", key("Manual"))) == [("D1", 0), ("D1", 1)]


def test_a_waiting_receive_is_answered_when_the_lock_is_released_or_times_out() -> None:
    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    b.send(0, "D1")
    b.begin_transaction(0, "S1")
    b.receive(0, "S1", key("Manual"))
    b.send(0, "D1")
    waiting = b.receive(0, "S2", key("Manual"), waitfor_ms=5000)
    assert waiting == {"status": "waiting"}
    b.commit(2000, "S1")
    answers = [e for e in b.drain_events() if e.kind == Kind.ROWS_RETURNED and e.fields["session"] == "S2"]
    assert [(e.at_ms, e.fields["rows"][0]["message_sequence_number"]) for e in answers] == [(2000, 1)]
    # an answer, once given, stays as it was: the rows came by the event
    assert waiting == {"status": "waiting"}
    assert b.receive(2000, "S3", key("Manual"), waitfor_ms=1000)["status"] == "waiting"
    b.advance(10_000)
    timed_out = [e for e in b.drain_events() if e.kind == Kind.EMPTY_RESULT and e.fields["session"] == "S3"]
    assert [e.at_ms for e in timed_out] == [3000]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: b.send(0, "nope"), "no dialog 'nope' has been begun"),
        (lambda b: b.commit(0, "S1"), "COMMIT in session 'S1', which has no open transaction"),
        (lambda b: b.alter_queue(0, key("Manual"), status="ON"), "STATUS = ON needs a PROCEDURE_NAME"),
        (lambda b: b.alter_queue(0, key("Manual"), procedure_name="zzz"), "no procedure 'zzz'"),
        (lambda b: b.exit_procedure(0, key("Busy"), 9), "activated task 9 of queue 'Busy' is not running"),
        (lambda b: b.begin_dialog(0, "D", "sql1", "shop", "Nobody", "ManualService"), "no service 'Nobody'"),
        (lambda b: b.advance(-1), "time cannot go back"),
    ],
)
def test_bad_commands_are_refused_with_a_reason(call: object, message: str) -> None:
    b = broker()
    with pytest.raises(BrokerError, match=message):
        call(b)  # type: ignore[operator]


def test_work_due_at_the_same_instant_runs_in_the_order_it_was_scheduled() -> None:
    clock = Clockwork(0)
    seen: list[str] = []
    clock.at(10, lambda: seen.append("a"))
    clock.at(5, lambda: seen.append("b"))
    clock.at(10, lambda: seen.append("c"))
    clock.settle(lambda: seen.append("settled"))
    clock.run_until(10)
    assert seen == ["settled", "b", "a", "c"]
    assert clock.now_ms == 10


def test_the_same_calls_give_the_same_log() -> None:
    def run() -> list[tuple[int, str]]:
        b = broker()
        b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "BusyService")
        for at in range(0, 20_000, 700):
            b.send(at, "D1")
        b.advance(120_000)
        return [(e.at_ms, e.kind) for e in b.drain_events()]

    assert run() == run()


def test_a_refused_fault_changes_nothing() -> None:
    b = broker()
    with pytest.raises(BrokerError, match="has 2 running task handlers, so 3 cannot fail"):
        b.fail_task_handlers(0, "sql1", 3)
    assert b.maintenance.rows()[0]["running_task_handlers"] == 2
    with pytest.raises(BrokerError, match="no instance 'sql9'"):
        b.fail_task_handlers(0, "sql9", 1)


def test_every_rule_of_the_catalogue_is_named_where_the_engine_decides_it() -> None:
    # a reader looking for a rule greps its id; a rule that only emerges from code is hard to find and to check
    text = "\n".join(path.read_text() for path in ENGINE.glob("*.py"))
    assert [rule for rule in catalogue.load().rules if not re.search(rf"\b{rule}\b", text)] == []


def test_commands_move_time_forward_only() -> None:
    b = broker()
    b.advance_time(5_000)
    with pytest.raises(BrokerError, match="time cannot go back"):
        b.begin_dialog(4_999, "D1", "sql1", "shop", "Initiator", "ManualService")
    assert b.conversations == {}


def test_send_and_receive_keep_the_command_convention_they_write_out() -> None:
    """context.command: what fell due runs first, then the statement, then what it set off at that same instant.

    SEND and RECEIVE write the three steps out rather than take the decorator (Broker.send says why).
    """
    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "BusyService")
    b.drain_events_json()
    b.send(12_000, "D1")
    events = [(e["at_ms"], e["kind"]) for e in b.drain_events_json()]
    # the timer notifications of 5 and 10 seconds before the message
    assert events.index((10_000, Kind.TIMER_NOTIFICATION)) < events.index((12_000, Kind.MESSAGE_SENT))
    # the arrival on an empty queue activates its procedure within the same call (ACT-06)
    assert events.index((12_000, Kind.MESSAGE_ARRIVED)) < events.index((12_000, Kind.PROCEDURE_STARTED))
    b.begin_dialog(12_000, "D2", "sql1", "shop", "Initiator", "ManualService")
    b.send(12_000, "D2")
    b.drain_events_json()
    answer = b.receive(16_000, "S1", key("Manual"))
    assert _seqs(answer) == [("D2", 0)]
    events = [(e["at_ms"], e["kind"]) for e in b.drain_events_json()]
    assert events.index((15_000, Kind.TIMER_NOTIFICATION)) < events.index((16_000, Kind.ROWS_RETURNED))


def _served_first(chooser_class: type) -> list[str]:
    """Two sessions wait on one queue, then one message comes: who got it, by CHOOSER_CLASS's pick."""
    broker_class = type("Picking", (Broker,), {"chooser_class": chooser_class})
    b = broker(broker_class)
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    for session in ("S1", "S2"):
        assert b.receive(0, session, key("Manual"), waitfor_ms=5000) == {"status": "waiting"}
    b.send(1000, "D1")
    return [e.fields["session"] for e in b.drain_events() if e.kind == Kind.ROWS_RETURNED]


def test_which_waiting_session_gets_a_message_is_an_open_choice() -> None:
    # the documents do not say which of two sessions waiting on a queue is served: either is allowed, one only
    assert _served_first(FirstChooser) == ["S1"]  # the reference: the first to wait
    assert _served_first(LastChooser) == ["S2"]


def test_the_stage_follows_the_waiting_session_the_implementation_served() -> None:
    following = FollowingChooser()
    waits = [{"kind": Kind.READER_WAITING, "at_ms": 0, "session": s, **_MANUAL} for s in ("S1", "S2")]
    got = {"kind": Kind.ROWS_RETURNED, "at_ms": 1000, "session": "S2", "statement": "RECEIVE", "rows": [], **_MANUAL}
    following.feed([*waits, got])
    following.about("sql1", {"waiter": "sql1/shop/Manual", "at_ms": 1000})
    assert following.choose(WAITER, ["S1", "S2"]) == "S2"
    # once the run served S2 at that instant, a later question of the same instant is not answered by it again
    following.about("sql1", {"served": "S2", "queue": "sql1/shop/Manual", "at_ms": 1000})
    following.about("sql1", {"waiter": "sql1/shop/Manual", "at_ms": 1000})
    assert following.choose(WAITER, ["S1", "S2"]) == "S1"


_MANUAL = {"instance": "sql1", "database": "shop", "queue": "Manual"}
