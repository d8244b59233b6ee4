"""A reproducer's stated log carries every field that differed, so that it shows the difference it was made for."""

from __future__ import annotations

import json

from sbtck.reports.results import FAILED
from sbtck.workloads.reproduce import THEN, differing_fields, then_steps
from sbtck.workloads.stage import Checker
from tests.variants import routing

EVERYTHING = frozenset(
    {"activation", "external_activation", "routing", "mirroring", "dynamic_routing", "forwarding", "decision_trace"}
)


def test_a_field_outside_the_usual_columns_that_differs_is_a_column() -> None:
    # routing.network_before_mirror differs only in route_chosen's candidates (seed 4, step 2)
    outcome = Checker(routing.network_before_mirror, True).check(4)
    assert outcome.outcome == FAILED
    assert outcome.iut_trace and outcome.reference_trace and outcome.script
    got = [e for step in json.loads(outcome.iut_trace) for e in step["events"]]
    expected = [e for step in json.loads(outcome.reference_trace) for e in step["events"]]
    assert "candidates" in differing_fields(expected, got)
    then = then_steps(expected, got, EVERYTHING, json.loads(outcome.script)[0]["at_ms"])
    header = next(line for line in then.splitlines() if line.strip().startswith("| second"))
    assert "candidates" in [cell.strip() for cell in header.split("|")]


def test_fields_that_agree_as_the_stage_compares_them_are_no_column() -> None:
    expected = [{"kind": "connection_attempt", "at_ms": 1, "address": "TCP://A:1", "routes": ["R1", "R2"]}]
    got = [{"kind": "connection_attempt", "at_ms": 2, "address": "tcp://a:1", "routes": ["R2", "R1"]}]
    assert differing_fields(expected, got) == []
    got[0]["result"] = "connected"
    expected[0]["result"] = "failed"
    assert differing_fields(expected, got) == ["result"]


def test_a_kind_an_implementation_may_leave_out_is_not_stated_where_it_did() -> None:
    """No Broker Configuration Notification where no BCN client exists (protocol.md marks it optional): a reproducer
    must not ask for the reference's (a clean-room author's world 597 could never pass on a broker without them)."""
    arrived = {"kind": "message_arrived", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    bcn = {"kind": "broker_configuration_notification", "at_ms": 25_000, "instance": "sql1"}
    expected = [{**arrived, "at_ms": 10_000}, bcn]
    got = [{**arrived, "at_ms": 20_000}]
    then = then_steps(expected, got, EVERYTHING | {"periodic_tasks"}, 0)
    assert "message arrived" in then and "broker configuration notification" not in then
    # nor where it reported them: the reproducer is to pass another broker of the same world, which may leave them
    # out; a difference in them alone is the searched check's, which holds the implementation to them as the stage
    then = then_steps([bcn], [{**bcn, "at_ms": 30_000}], EVERYTHING | {"periodic_tasks"}, 0)
    assert then == THEN


def test_a_kind_reported_at_start_as_the_documents_allow_is_not_stated_absent() -> None:
    """database_broker_started may be reported at start or not (protocol.md): a broker that reports it there, where
    the reference does not, is not told the log has none (the eighth clean-room author's world 10770)."""
    arrived = {"kind": "message_arrived", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    started = {"kind": "database_broker_started", "at_ms": 0, "instance": "sql1", "database": "db"}
    expected = [{**arrived, "at_ms": 10_000}]
    got = [started, {**arrived, "at_ms": 20_000}]
    then = then_steps(expected, got, EVERYTHING | {"periodic_tasks"}, 0)
    assert "message arrived" in then and "database broker started" not in then
    # reported later, where the reference reports none, it is stated absent
    then = then_steps(expected, [*got, {**started, "at_ms": 15_000}], EVERYTHING | {"periodic_tasks"}, 0)
    assert 'has no "database broker started" events' in then


def test_a_report_whose_presence_is_not_compared_is_not_stated() -> None:
    """routing_retried's presence and moment are not compared (protocol.md), so a reproducer never asks for it: a
    broker that sends a message waiting for its connection where it was routed reports none when the connection opens
    (the ninth clean-room author's D1, world 267)."""
    arrived = {"kind": "message_arrived", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    retried = {"kind": "routing_retried", "at_ms": 30_000, "instance": "sql1", "dialog": "D1"}
    expected = [{**arrived, "at_ms": 10_000}, {**retried, "message_sequence_number": 3}]
    got = [{**arrived, "at_ms": 20_000}]
    then = then_steps(expected, got, EVERYTHING, 0)
    assert "message arrived" in then and "routing retried" not in then
    # nor stated absent where the implementation reports one the reference does not
    then = then_steps(expected[:1], [*got, {**retried, "message_sequence_number": 3}], EVERYTHING, 0)
    assert "routing retried" not in then


def test_a_stated_log_allows_every_history_the_documents_allow() -> None:
    """A reproducer is to become a regression scenario: its table allows each allowed history of its world, a cell
    "a or b" where they differ (cr14's D1-D3: a stated log of one history failed the broker once mended onto
    another), and still fails the implementation it came from."""
    arrived = {"kind": "message_arrived", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    one, other = [{**arrived, "at_ms": 10_000}], [{**arrived, "at_ms": 20_000}]
    then = then_steps(one, [{**arrived, "at_ms": 30_000}], EVERYTHING, 0, [other])
    row = next(line for line in then.splitlines() if "message arrived" in line)
    assert "10 or 20" in row, then
    # a trace one of the histories gives shows no difference in the table: the searched check decides
    assert then_steps(one, [{**arrived, "at_ms": 20_000}], EVERYTHING, 0, [other]) == THEN


def test_histories_whose_rows_do_not_line_up_state_no_log() -> None:
    arrived = {"kind": "message_arrived", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    dropped = {"kind": "message_dropped", "instance": "sql1", "dialog": "D1", "message_sequence_number": 0}
    one = [{**arrived, "at_ms": 10_000}]
    other = [{**dropped, "at_ms": 10_000, "reason": "no route"}]
    got = [{**arrived, "at_ms": 30_000}]
    assert then_steps(one, got, EVERYTHING, 0) != THEN  # alone, the one history is stated
    assert then_steps(one, got, EVERYTHING, 0, [other]) == THEN
