"""One comparison for the suite and the stage (sbtck/agreement.py): what each asks, and how values agree."""

from __future__ import annotations

import ast
from pathlib import Path

from sbtck import agreement
from sbtck.agreement import agree, arrangement, asked, asked_field, field_agrees, without_reasoning
from sbtck.observations import Kind
from sbtck.steps.cells import as_compared, cell

ROOT = Path(__file__).resolve().parents[2]
ROUTING = frozenset({"routing"})
TRACED = ROUTING | {"decision_trace"}


def test_an_address_compares_without_case_in_a_table_and_in_a_trace_alike() -> None:
    for column in ("address", "mirror_address"):
        assert cell(column, "tcp://sql2:4022", 0) == as_compared(column, "TCP://SQL2:4022")
        assert field_agrees("route_created", column, "tcp://sql2:4022", "TCP://sql2:4022")
    assert cell("route", "r1", 0) != as_compared("route", "R1")  # a name is not an address
    assert not field_agrees("route_created", "route", "r1", "R1")


def test_what_only_a_decision_trace_shows_is_asked_only_of_an_implementation_that_declares_it() -> None:
    assert not asked(Kind.ROUTES_MATCHED, ROUTING) and asked(Kind.ROUTES_MATCHED, TRACED)
    assert asked(Kind.MESSAGE_ARRIVED, ROUTING)
    assert not asked_field("step", ROUTING) and not asked_field("rule", ROUTING) and asked_field("step", TRACED)
    assert asked_field("dialog", ROUTING)
    event = {"kind": "message_dropped", "at_ms": 1, "dialog": "D1", "rule": "RTX-1"}
    assert without_reasoning(event) == {"kind": "message_dropped", "at_ms": 1, "dialog": "D1"}


def test_an_echo_of_the_kits_own_fault_is_asked_of_no_one() -> None:
    assert not asked(Kind.INSTANCE_UNREACHABLE, TRACED | {"periodic_tasks"})


def test_a_field_one_side_does_not_carry_is_no_difference_and_lists_compare_as_sets() -> None:
    mine = {"kind": "message_arrived", "at_ms": 5, "dialog": "D2", "message_sequence_number": 0}
    assert agree(mine, {**mine, "from_target": True})
    assert not agree(mine, {**mine, "message_sequence_number": 1})
    assert not agree(mine, {**mine, "kind": "message_sent"})
    assert field_agrees("routes_matched", "routes", ["b", "a"], ["a", "b"])
    # which member names a group of identical routes is open (RTC-0): the candidates count, not their names
    assert field_agrees(Kind.ROUTE_CHOSEN, "candidates", ["r1", "r2"], ["r3", "r2"])
    assert not field_agrees(Kind.ROUTE_CHOSEN, "candidates", ["r1", "r2"], ["r2"])


def test_the_events_of_one_instant_are_arranged_as_a_set_where_a_first_fit_would_give_up() -> None:
    # the first wanted row fits both, the second only the first: taking the first fit for the first fails
    assert arrangement(["ab", "a"], ["a", "b"], lambda w, g: w in g) == [1, 0]
    assert arrangement(["a", "a"], ["a", "b"], lambda w, g: w in g) is None
    assert arrangement([], [], lambda w, g: True) == []


def test_the_suites_steps_and_the_stages_comparison_both_ask_it_and_keep_no_copy() -> None:
    """So that the suite and the stage cannot drift apart: neither module defines what agreement.py decides."""
    decided = {"CASE_FREE", "BY_NUMBER", "canonical", "_canonical", "_fitting_rows", "_same", "_field_same"}
    for path in ("steps/observe_steps.py", "workloads/differential.py", "steps/cells.py"):
        tree = ast.parse((ROOT / path).read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == agreement.__name__
            for alias in node.names
        }
        assert imported, f"{path} does not ask sbtck.agreement"
        defined = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        } | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert not defined & decided, f"{path} decides again what sbtck.agreement decides: {defined & decided}"


def test_each_field_compares_by_its_declared_class() -> None:
    from sbtck.agreement import compares, field_class, held

    assert not compares(Kind.MESSAGE_DROPPED, "reason") and compares(Kind.CONNECTION_CLOSED, "reason")
    assert not compares(Kind.TRANSMISSION_PENDING, "status") and not compares(None, "transmission_status")
    assert field_class(Kind.PROCEDURE_STARTED, "spid") == "relative" and field_class(None, "spid") == "relative"
    assert field_class(None, "received_ms") == "time" and field_class(Kind.ACTIVATION_NECESSARY, "rule") == "reasoning"
    assert field_agrees(Kind.MESSAGE_DROPPED, "reason", "a", "b") and not field_agrees(
        Kind.DIALOG_BEGUN, "dialog", "a", "b"
    )
    # effects are held always, a report only where docs/protocol.md says when it is reported
    assert held(Kind.MESSAGE_ARRIVED) and held(Kind.ROUTE_CHOSEN)
    assert not held(Kind.ROUTING_RETRIED) and not held(Kind.CONVERSATION_DELAYED) and not held("made_up")
