"""One step of an implementation's trace against the reference's: what pairs up, and what is a difference.

The design note of sbtck/workloads/differential.py, point 3: within a step only events of the same kind and
instant pair up, one for one, in any order; a field one side does not report is no difference; lists compare
as sets; a route_chosen's candidates compare by number.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from sbtck.engine import EngineParams
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind
from sbtck.reports.results import PASSED
from sbtck.workloads.differential import DIFFERENCE, Carried, differ, reference_params, rules_of
from sbtck.workloads.landscape import ALL
from sbtck.workloads.stage import Checker

SENT = {"at_ms": 5000, "kind": Kind.MESSAGE_SENT, "instance": "sql1", "dialog": "D1", "from_target": False}
ARRIVED = {"at_ms": 5000, "kind": Kind.MESSAGE_ARRIVED, "instance": "sql2", "dialog": "D1", "queue": "Q"}
CHOSEN = {
    "at_ms": 5000,
    "kind": Kind.ROUTE_CHOSEN,
    "instance": "sql1",
    "dialog": "D1",
    "candidates": ["R1", "R2"],
}


def _step(*events: dict[str, Any], result: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    return {"kind": "send", "error": error, "result": result or {}, "events": [dict(e) for e in events]}


def _differ(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [v.detail for v in differ(3, got, want, ALL)]


def test_the_same_step_is_no_difference() -> None:
    assert _differ(_step(SENT, ARRIVED), _step(SENT, ARRIVED)) == []


def test_events_of_one_step_pair_up_in_any_order() -> None:
    assert _differ(_step(ARRIVED, SENT), _step(SENT, ARRIVED)) == []


def test_a_field_one_side_does_not_report_is_no_difference() -> None:
    terse = {k: v for k, v in ARRIVED.items() if k != "queue"}
    assert _differ(_step(SENT, terse), _step(SENT, ARRIVED)) == []
    assert _differ(_step(SENT, ARRIVED), _step(SENT, terse)) == []


def test_a_field_both_report_differently_is_a_difference_either_way() -> None:
    elsewhere = {**ARRIVED, "queue": "OtherQueue"}
    found = differ(3, _step(SENT, elsewhere), _step(SENT, ARRIVED), ALL)
    assert found and all(v.at_step == 3 for v in found)
    assert "unexpected message_arrived@5000; missing message_arrived@5000" in found[0].detail
    assert _differ(_step(SENT, ARRIVED), _step(SENT, elsewhere))


def test_an_event_at_another_instant_does_not_pair_up() -> None:
    later = {**ARRIVED, "at_ms": 5001}
    assert (
        "unexpected message_arrived@5001; missing message_arrived@5000"
        in _differ(_step(SENT, later), _step(SENT, ARRIVED))[0]
    )


def test_a_missing_or_repeated_event_is_a_difference() -> None:
    assert "unexpected nothing; missing message_arrived@5000" in _differ(_step(SENT), _step(SENT, ARRIVED))[0]
    assert "unexpected message_sent@5000; missing nothing" in _differ(_step(SENT, SENT), _step(SENT))[0]


def test_lists_compare_as_sets() -> None:
    swapped = {**SENT, "tasks": ["b", "a"]}
    assert _differ(_step(swapped), _step({**SENT, "tasks": ["a", "b"]})) == []
    assert _differ(_step(swapped), _step({**SENT, "tasks": ["a", "c"]}))


def test_route_candidates_compare_by_number() -> None:
    # which member names a group of identical routes is an open choice (RTC-0)
    assert _differ(_step({**CHOSEN, "candidates": ["R3", "R4"]}), _step(CHOSEN)) == []
    assert _differ(_step({**CHOSEN, "candidates": ["R1"]}), _step(CHOSEN))


def _view(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "query_view", "error": None, "result": {"rows": list(rows)}, "events": []}


def test_a_views_rows_compare_as_a_multiset_of_their_declared_columns() -> None:
    d1, d2 = {"dialog": "D1", "instance": "sql1"}, {"dialog": "D2", "instance": "sql1"}
    assert differ(3, _view(d2, d1), _view(d1, d2), ALL) == []
    assert differ(3, _view({**d1, "my_own_column": 7}, d2), _view(d1, d2), ALL) == []
    assert [v.rule for v in differ(3, _view(d1), _view(d1, d2), ALL)] == [DIFFERENCE]
    assert [v.rule for v in differ(3, _view(d1, d1), _view(d1, d2), ALL)] == [DIFFERENCE]
    assert [v.rule for v in differ(3, _view({**d1, "dialog": "D3"}, d2), _view(d1, d2), ALL)] == [DIFFERENCE]


def test_a_result_the_contract_does_not_declare_is_not_compared() -> None:
    # docs/protocol.md declares the rows of query_view and no other command's result
    assert _differ(_step(SENT, result={}), _step(SENT, result={"dialog": "D1"})) == []
    assert _differ(_step(SENT, result={"message_sequence_number": 0}), _step(SENT, result={})) == []


def test_echoes_of_the_kits_own_faults_are_never_compared() -> None:
    echo = {"at_ms": 5000, "kind": Kind.INSTANCE_UNREACHABLE, "instance": "sql2"}
    assert _differ(_step(SENT), _step(SENT, echo)) == []
    assert _differ(_step(SENT, echo), _step(SENT)) == []


def test_decision_fields_are_compared_only_with_a_decision_trace() -> None:
    dropped = {"at_ms": 5000, "kind": Kind.MESSAGE_DROPPED, "instance": "sql1", "dialog": "D1"}
    capabilities = frozenset({"routing"})
    got, want = _step({**dropped, "rule": "RTX-1"}), _step({**dropped, "rule": "RTC-5"})
    assert differ(3, got, want, capabilities) == []
    assert differ(3, got, want, capabilities | {"decision_trace"})


BCN = {"at_ms": 25000, "kind": Kind.BROKER_CONFIGURATION_NOTIFICATION, "instance": "sql1"}
FAILED = {"at_ms": 0, "kind": Kind.DATABASE_BROKER_START_FAILED, "instance": "sql1", "database": "db"}
STARTED = {"at_ms": 0, "kind": Kind.DATABASE_BROKER_STARTED, "instance": "sql1", "database": "db"}


def test_a_bcn_may_go_unreported_but_one_the_reference_does_not_fire_is_a_difference() -> None:
    assert differ(3, _step(), _step(BCN), ALL, Carried()) == []
    assert differ(3, _step({**BCN, "at_ms": 20000}), _step(), ALL, Carried())


def test_a_database_failing_to_start_is_reported_the_first_time_and_after_that_as_the_broker_likes() -> None:
    carried = Carried()
    assert differ(0, _step(), _step(FAILED), ALL, carried)  # the first failure must show
    carried = Carried()
    assert differ(0, _step(FAILED), _step(FAILED), ALL, carried) == []
    again = {**FAILED, "at_ms": 25000}
    assert differ(9, _step(), _step(again), ALL, carried) == []
    other = {**again, "database": "db2"}
    assert differ(9, _step(), _step(other), ALL, carried)  # another database's first failure


def test_a_database_may_be_reported_started_at_start_unless_it_failed() -> None:
    start: dict[str, Any] = {"kind": "start", "error": None, "result": {}}
    assert differ(0, {**start, "events": [STARTED]}, {**start, "events": []}, ALL, Carried()) == []
    assert differ(0, {**start, "events": [STARTED, FAILED]}, {**start, "events": [FAILED]}, ALL, Carried())
    assert differ(4, _step(STARTED), _step(), ALL, Carried())  # later, only PER-5C's retry starts it


def test_a_refusal_the_reference_does_not_make_is_a_difference() -> None:
    assert _differ(_step(error="no such dialog"), _step(SENT)) == [
        "send refused: no such dialog; the reference accepted it"
    ]


def test_conversation_groups_compare_by_the_messages_they_hold_not_by_their_names() -> None:
    arrived = {**ARRIVED, "database": "db", "conversation_group": "D1"}
    mine = {**arrived, "conversation_group": "6F9619FF-8B86-D011-B42D-00C04FC964FF"}
    carried = Carried()
    assert differ(3, _step(mine), _step(arrived), ALL, carried) == []
    second = {**arrived, "dialog": "D2", "conversation_group": "D1"}  # D2 joins D1's group in the reference
    assert (
        differ(4, _step({**second, "conversation_group": mine["conversation_group"]}), _step(second), ALL, carried)
        == []
    )
    assert differ(5, _step({**second, "conversation_group": "another"}), _step(second), ALL, carried)
    assert differ(3, _step(mine), _step(arrived), ALL)  # without what earlier steps showed, names are compared


def test_addresses_compare_without_case() -> None:
    attempt = {"at_ms": 5000, "kind": Kind.CONNECTION_ATTEMPT, "instance": "sql1", "result": "connected"}
    upper, lower = {**attempt, "address": "TCP://SQL2.EXAMPLE:4022"}, {**attempt, "address": "tcp://sql2.example:4022"}
    assert differ(3, _step(lower), _step(upper), ALL, Carried()) == []
    assert differ(3, _step({**lower, "address": "tcp://sql3.example:4022"}), _step(upper), ALL, Carried())


def test_a_wait_that_ends_in_the_instant_it_began_is_no_difference() -> None:
    where = {"instance": "sql1", "database": "db", "queue": "Q1", "session": "Q1#1", "statement": "RECEIVE"}
    waiting = {"at_ms": 14000, "kind": Kind.READER_WAITING, **where}
    rows = {"at_ms": 14000, "kind": Kind.ROWS_RETURNED, **where, "rows": [{"dialog": "D3"}]}
    assert differ(3, _step(waiting, rows), _step(rows), ALL, Carried()) == []
    assert differ(3, _step(rows), _step(waiting, rows), ALL, Carried()) == []
    # a wait that lasts past its instant shows in sys.dm_broker_queue_monitors
    assert differ(3, _step(rows, {**waiting, "at_ms": 14000}), _step(rows), ALL, Carried())
    assert differ(3, _step(waiting, {**rows, "at_ms": 15000}), _step({**rows, "at_ms": 15000}), ALL, Carried())


def test_a_waiting_messages_status_is_free_text_and_names_no_rule() -> None:
    # no document defines the words: the kind speaks for its own rule whatever the status says
    pending = {"at_ms": 0, "kind": Kind.TRANSMISSION_PENDING, "instance": "sql1", "dialog": "D1"}
    for status in ("delayed", "waiting for a connection to TCP://SQL2:4022", "An error occurred"):
        assert rules_of([{**pending, "status": status}]) == ["PER-2B"], status


def test_an_open_time_declared_with_a_half_runs_the_reference_with_that_half() -> None:
    """ "Any number of seconds in their range, a half included" (implementing.md, 2): 2.5 is not 2."""
    params = reference_params({"activation_empty_window_s": 2.5, "delayed_retry_s": 7.5, "forward_hop_limit": 3})
    assert (params.activation_empty_window_s, params.delayed_retry_s, params.forward_hop_limit) == (2.5, 7.5, 3)
    declared = dataclasses.replace(EngineParams.reference(), activation_empty_window_s=2.5)
    implementation = ReferenceImplementation(params=declared, name="window of 2.5 s")
    implementation.profile["params"]["activation_empty_window_s"] = 2.5
    checker = Checker(lambda: implementation, differential=True, areas=("activation",))
    try:
        outcomes = Counter(checker.check(seed).outcome for seed in range(40))
    finally:
        checker.close()
    assert outcomes == Counter({PASSED: 40})


def test_a_message_that_left_its_sender_and_never_arrived_may_stay_in_its_transmission_queue_or_not() -> None:
    """PER-5E cleans up acknowledged messages; whether one transmitted, then dropped or lost further on, stays at
    its sender until acknowledged is not said: its row is compared neither way. A message that never left is."""
    carried = Carried()
    left = {"at_ms": 5000, "kind": Kind.MESSAGE_TRANSMITTED, "instance": "sql1", "dialog": "D1"}
    left |= {"message_sequence_number": 0, "from_target": False, "address": "TCP://sql2.example:4022"}
    assert differ(2, _step(left), _step(left), ALL, carried) == []
    row = {"instance": "sql1", "dialog": "D1", "message_sequence_number": 0, "from_target": False}
    row |= {"to_service_name": "T", "transmission_status": "", "received_ms": 5000}
    kept, gone = _step(result={"rows": [row]}), _step(result={"rows": []})
    kept["kind"] = gone["kind"] = "query_view"
    assert differ(3, kept, gone, ALL, carried) == [] and differ(3, gone, kept, ALL, carried) == []
    waiting = _step(result={"rows": [{**row, "dialog": "D2"}]})
    waiting["kind"] = "query_view"
    assert differ(3, waiting, gone, ALL, carried)  # D2 never left sql1: its row must be there
    arrived = {**ARRIVED, "message_sequence_number": 0, "from_target": False}
    assert differ(4, _step(arrived), _step(arrived), ALL, carried) == []
    assert differ(5, kept, gone, ALL, carried)  # it arrived: acknowledged, its clean-up is the periodic tasks'


ROUTING = frozenset({"routing", "decision_trace"})


def test_a_report_whose_moment_no_document_states_is_not_held_against_an_implementation() -> None:
    # routing_retried, conversation_delayed, transmission_pending: present, absent or at another instant alike
    retried = {"at_ms": 15000, "kind": Kind.ROUTING_RETRIED, "instance": "sql1", "dialog": "D1"}
    delayed = {**retried, "kind": Kind.CONVERSATION_DELAYED, "step": "RTC-4"}
    pending = {**retried, "kind": Kind.TRANSMISSION_PENDING, "status": "delayed"}
    for report in (retried, delayed, pending):
        assert differ(3, _step(SENT), _step(SENT, report), ROUTING) == []
        assert differ(3, _step(SENT, {**report, "at_ms": 9000}), _step(SENT, report), ROUTING) == []
    # an effect stays compared: where it is missing, it differs
    assert differ(3, _step(SENT), _step(SENT, ARRIVED), ROUTING)


def test_free_text_is_never_compared_in_events_or_in_view_rows() -> None:
    dropped = {"at_ms": 5000, "kind": Kind.MESSAGE_DROPPED, "instance": "sql1", "dialog": "D1", "rule": "RTC-5"}
    assert _differ(_step({**dropped, "reason": "no route"}), _step({**dropped, "reason": "forwarding is off"})) == []
    waiting = {"dialog": "D1", "instance": "sql1", "transmission_status": "waiting for a connection to TCP://a:1"}
    assert differ(3, _view({**waiting, "transmission_status": "An error occurred"}), _view(waiting), ALL) == []
    assert differ(3, _view({**waiting, "dialog": "D2"}), _view(waiting), ALL)  # the other columns still count


TASK = {"at_ms": 5000, "kind": Kind.PROCEDURE_STARTED, "instance": "sql1", "database": "db", "queue": "Q"}


def test_a_spid_is_compared_by_the_activated_task_it_belongs_to_never_by_number() -> None:
    mine = _step({**TASK, "task": 1, "spid": 7}, {**TASK, "task": 2, "spid": 9})
    theirs = _step({**TASK, "task": 1, "spid": 52}, {**TASK, "task": 2, "spid": 53})
    assert differ(3, mine, theirs, ALL, Carried()) == []
    # one spid for two tasks at once where the reference gives them two is a difference
    same = _step({**TASK, "task": 1, "spid": 7}, {**TASK, "task": 2, "spid": 7})
    assert differ(3, same, theirs, ALL, Carried())
    tasks = {"instance": "sql1", "database": "db", "queue": "Q", "task": 1}
    assert differ(3, _view({**tasks, "spid": 70}), _view({**tasks, "spid": 51}), ALL, Carried()) == []


NECESSARY = {"at_ms": 10000, "kind": Kind.ACTIVATION_NECESSARY, "instance": "sql1", "database": "db", "queue": "Q"}
TICK = {"at_ms": 10000, "kind": Kind.TIMER_NOTIFICATION, "instance": "sql1", "number": 2}
ARRIVAL = {**NECESSARY, "kind": Kind.MESSAGE_ARRIVED, "dialog": "D1"}
BY_ARRIVAL = {**NECESSARY, "rule": "ACT-06", "trigger": "message arrived"}
BY_TIMER = {**NECESSARY, "rule": "ACT-07", "trigger": "timer notification"}
STARTS = {**TASK, "at_ms": 10000, "task": 1}


def test_coinciding_triggers_decide_nothing_by_which_one_is_named() -> None:
    # a message arrives on the queue in the instant of the timer notification: ACT-06 and ACT-07 both apply
    activation = frozenset({"activation", "decision_trace", "periodic_tasks"})
    want = _step(TICK, ARRIVAL, BY_ARRIVAL, STARTS)
    assert differ(3, _step(TICK, ARRIVAL, BY_TIMER, STARTS), want, activation) == []
    # without the arrival only ACT-07 applies; without the tick only ACT-06
    assert differ(3, _step(TICK, BY_ARRIVAL, STARTS), _step(TICK, BY_TIMER, STARTS), activation)
    assert differ(3, _step(ARRIVAL, BY_TIMER, STARTS), _step(ARRIVAL, BY_ARRIVAL, STARTS), activation)
    # and the procedure's start, an effect, is compared as ever
    assert differ(3, _step(TICK, ARRIVAL, BY_TIMER), want, activation)


RECEIVED = {**NECESSARY, "kind": Kind.ROWS_RETURNED, "session": "S1", "statement": "RECEIVE", "has_where": False}
WITHHELD = {**NECESSARY, "kind": Kind.ACTIVATION_WITHHELD, "reason": "MAX_QUEUE_READERS"}
BY_RECEIVE = {**NECESSARY, "rule": "ACT-07", "trigger": "RECEIVE"}
BY_ARRIVAL_7 = {**NECESSARY, "rule": "ACT-07", "trigger": "message arrived"}


def test_looks_of_one_instant_that_find_the_same_are_one_report() -> None:
    # a waiting RECEIVE returns the message that arrives and a second arrives: a look for each trigger, and how many
    # find the queue holding an unread message depends on their order in the instant, which ACT-05 does not give
    activation = frozenset({"activation", "decision_trace"})
    want = _step(ARRIVAL, RECEIVED, ARRIVAL, BY_ARRIVAL_7, WITHHELD)
    twice = _step(ARRIVAL, RECEIVED, ARRIVAL, BY_RECEIVE, WITHHELD, BY_ARRIVAL_7, WITHHELD)
    assert differ(3, twice, want, activation) == []
    assert differ(3, want, twice, activation) == []
    # the same found at another instant is another report, and a report the other side lacks still differs
    later = {"at_ms": 11000}
    assert differ(
        3, _step(ARRIVAL, RECEIVED, ARRIVAL, BY_ARRIVAL_7, WITHHELD, {**BY_ARRIVAL_7, **later}), want, activation
    )
    assert differ(3, _step(ARRIVAL, RECEIVED, ARRIVAL, BY_ARRIVAL_7), want, activation)
    # an effect is counted one for one: two procedures started are not one
    assert differ(3, _step(ARRIVAL, BY_ARRIVAL_7, STARTS, STARTS), _step(ARRIVAL, BY_ARRIVAL_7, STARTS), activation)
