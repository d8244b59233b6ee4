"""One step of an implementation's trace against the reference's: what pairs up, and what is a difference.

The design note of sbtck/workloads/differential.py, point 3: within a step only events of the same kind and
instant pair up, one for one, in any order; a field one side does not report is no difference; lists compare
as sets; a route_chosen's candidates compare by number.
"""

from __future__ import annotations

from typing import Any

from sbtck.observations import Kind
from sbtck.workloads.differential import DIFFERENCE, differ
from sbtck.workloads.landscape import ALL

SENT = {"at_ms": 5000, "kind": Kind.MESSAGE_SENT.value, "instance": "sql1", "dialog": "D1", "from_target": False}
ARRIVED = {"at_ms": 5000, "kind": Kind.MESSAGE_ARRIVED.value, "instance": "sql2", "dialog": "D1", "queue": "Q"}
CHOSEN = {
    "at_ms": 5000,
    "kind": Kind.ROUTE_CHOSEN.value,
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


def test_results_compare_with_their_lists_as_sets() -> None:
    rows = {"rows": [{"dialog": "D1"}, {"dialog": "D2"}]}
    assert _differ(_step(result={"rows": rows["rows"][::-1]}), _step(result=rows)) == []
    found = differ(3, _step(result={"rows": [{"dialog": "D1"}]}), _step(result=rows), ALL)
    assert [v.rule for v in found] == [DIFFERENCE]


def test_a_refusal_the_reference_does_not_make_is_a_difference() -> None:
    assert _differ(_step(error="no such dialog"), _step(SENT)) == [
        "send refused: no such dialog; the reference accepted it"
    ]
