"""docs/protocol.schema.json: generated from the contract, and what the kit sends and the reference answers fits it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from sbtck import contract
from sbtck.iut import schema
from sbtck.iut.reference import ReferenceImplementation
from sbtck.topology import Topology, decode, plain
from sbtck.workloads.generate import generate
from tests.helpers import ROOT

FILE = ROOT / "docs" / "protocol.schema.json"
SCHEMA = schema.render()


def _valid(definition: str, value: Any) -> bool:
    return not list(_checker(definition).iter_errors(value))


def _checker(definition: str) -> jsonschema.Draft202012Validator:
    document = {key: value for key, value in SCHEMA.items() if key != "oneOf"}
    return jsonschema.Draft202012Validator({**document, "$ref": f"#/$defs/{definition}"})


def test_the_file_is_the_schema_the_contract_gives_today() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert FILE.read_text() == schema.text(), "regenerate: python -m sbtck.iut.schema > docs/protocol.schema.json"


def test_every_command_event_kind_and_view_is_declared() -> None:
    defined = SCHEMA["$defs"]
    assert {k.removeprefix("command_") for k in defined if k.startswith("command_")} == set(contract.COMMANDS)
    assert {k.removeprefix("result_") for k in defined if k.startswith("result_")} == set(contract.COMMANDS)
    assert not _valid("result_query_view", {}) and not _valid("result_query_view", {"rows": 3})
    assert all(f"row_{view}" in defined for view in contract.VIEWS)


@pytest.mark.parametrize("capabilities", [None, ["routing"], ["activation"], ["periodic_tasks"]])
def test_the_kits_requests_and_the_references_answers_fit_the_schema(capabilities: list[str] | None) -> None:
    line = _checker("request")
    answer = _checker("answer")
    for seed in range(3):
        world = generate(seed, capabilities=capabilities)
        reference = ReferenceImplementation()
        hello = reference.handshake()
        assert _valid("hello_result", {"name": hello.name, "protocol": hello.protocol, "params": hello.params})
        for i, op in enumerate(world.script):
            request = {"id": i + 2, "op": "execute", "command": op}
            assert not list(line.iter_errors(json.loads(json.dumps(request)))), op
            error, result, events = reference.execute_json(op)
            reply = {"id": i + 2, "ok": error is None, "events": events}
            reply |= {"error": error} if error is not None else {"result": result}
            errors = [e.message for e in answer.iter_errors(json.loads(json.dumps(reply)))]
            assert errors == [], (op["kind"], errors[:3])
            if error is None:
                assert _valid(f"result_{op['kind']}", result), (op["kind"], result)
            if op["kind"] == "query_view" and error is None:
                rows = _checker(f"row_{op['view']}")
                assert all(not list(rows.iter_errors(row)) for row in result["rows"]), op["view"]


def test_a_wrong_line_does_not_fit() -> None:
    assert not _valid("request", {"id": 1, "op": "execute", "command": {"kind": "teleport", "at_ms": 0}})
    assert not _valid("request", {"id": 1, "op": "execute", "command": {"kind": "send", "at_ms": 0}})  # no dialog
    assert not _valid("answer", {"id": 1, "ok": True, "events": [{"kind": "message_sent", "at_ms": "soon"}]})
    arrived = {"kind": "message_arrived", "at_ms": 5, "dialog": "D1", "message_sequence_number": "0"}
    assert not _valid("answer", {"id": 1, "ok": True, "events": [arrived]})
    assert _valid("answer", {"id": 1, "ok": True, "events": [{**arrived, "message_sequence_number": 0, "mine": 1}]})
    row = {"instance": "sql1", "address": "TCP://sql2:4022", "state": "CONNECTED", "opened_ms": 0}
    assert not _valid("row_sys.dm_broker_connections", row)  # last_activity_ms missing
    assert _valid("row_sys.dm_broker_connections", {**row, "last_activity_ms": 0})


def test_a_start_carries_the_whole_topology_as_the_schema_gives_it() -> None:
    """The topology's JSON is in the schema field by field (cr13's G1: it said only "object")."""
    topology = plain(decode({"instances": [{"name": "sql1", "databases": [{"name": "db"}]}]}, Topology, "topology"))
    start = {"id": 1, "op": "execute", "command": {"kind": "start", "at_ms": 0, "topology": topology}}
    assert _valid("request", start)
    database = topology["instances"][0]["databases"][0]
    for wrong in ({**database, "master_key": "no"}, {k: v for k, v in database.items() if k != "routes"}):
        topology["instances"][0]["databases"] = [wrong]
        assert not _valid("request", start), wrong
