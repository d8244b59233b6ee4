"""Event kinds are declared once (sbtck/observations.py) and the engine emits no other."""

from __future__ import annotations

import re

from sbtck.observations import EVIDENCES, KINDS, Kind
from tests.lint.test_layers import KNOWN


def test_every_declared_kind_is_emitted_by_the_engine() -> None:
    # and every kind the engine writes is declared: Kind.X of an undeclared X is an error mypy finds
    engine = "\n".join(path.read_text() for module, path in KNOWN.items() if module.startswith("sbtck.engine"))
    assert [name for name in vars(Kind) if name.isupper() and not re.search(rf"\bKind\.{name}\b", engine)] == []


def test_every_rule_an_event_evidences_is_in_the_catalogue() -> None:
    from sbtck import catalogue

    assert set(EVIDENCES.values()) <= set(catalogue.load().rules)


def test_events_carry_plain_strings() -> None:
    # xdist, pickle and JSON must see the kind on the wire, not the enum that names it
    from enum import Enum

    from tests.engine.world import broker

    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    b.send(0, "D1")
    b.begin_dialog(0, "D2", "sql1", "shop", "Initiator", "BusyService")
    b.send(0, "D2")
    events = b.drain_events()
    assert events and all(type(event.kind) is str for event in events)
    assert any(event.fields.get("trigger") for event in events)
    assert not [(e.kind, k) for e in events for k, v in e.fields.items() if isinstance(v, Enum)]


def test_every_kind_has_its_area() -> None:
    from sbtck.contract import CAPABILITIES
    from sbtck.observations import AREA

    assert set(AREA) == set(KINDS)
    assert {capability for needed in AREA.values() for capability in needed} <= set(CAPABILITIES)


def test_the_engine_reports_only_declared_fields_and_values_and_every_field_says_what_it_is() -> None:
    from sbtck import catalogue
    from sbtck.iut.reference import reference
    from sbtck.observations import FIELD_MEANINGS, FIELDS, REASONS, RULE_FIELDS, VALUES
    from sbtck.workloads.generate import generate
    from sbtck.workloads.trace import run

    undeclared, unknown = set(), set()
    for seed in range(150):
        for event in run(generate(seed), reference()).events():
            undeclared |= {(event["kind"], f) for f in set(event) - {"kind", "at_ms"} - set(FIELDS[event["kind"]])}
            unknown |= {(f, event[f]) for f in VALUES if f in event and event[f] not in VALUES[f]}
            unknown |= {(f, event[f]) for f in RULE_FIELDS if f in event and event[f] not in catalogue.load().rules}
            reasons = REASONS.get(event["kind"])
            if reasons is not None and event.get("reason") not in reasons:
                unknown.add(("reason", event.get("reason")))
    assert undeclared == set()
    assert unknown == set()
    used = {field for fields in FIELDS.values() for field in fields}
    assert used == set(FIELD_MEANINGS)


def test_every_view_answers_the_declared_columns_of_their_types_and_every_column_says_what_it_is() -> None:
    from sbtck import contract
    from sbtck.iut.answers import RECEIVED_ROW, check_result
    from sbtck.iut.reference import reference
    from sbtck.observations import FIELD_MEANINGS
    from sbtck.views import COLUMN_MEANINGS, COLUMN_TYPES, VIEW_COLUMNS
    from sbtck.workloads.generate import generate
    from sbtck.workloads.trace import execute

    seen: dict[str, set[str]] = {view: set() for view in VIEW_COLUMNS}
    implementation = reference()
    for seed in range(40):
        world = generate(seed)
        for index, op in enumerate(world.script):
            execute(op, implementation)
            if index % 4 or index == 0:
                continue
            for view in contract.VIEWS:  # in the middle of the world, where messages wait on their way
                instance = "sql1" if view in ("sys.routes", "sys.transmission_queue") else None
                command = contract.QueryView(op["at_ms"], view, instance, None)
                answer = implementation.execute(command)
                check_result(command, answer)  # every column of its declared type
                for row in answer.result.get("rows", []):
                    assert set(row) == set(VIEW_COLUMNS[view]), (view, sorted(row))
                    seen[view] |= set(row)
    assert [view for view, columns in seen.items() if not columns] == []  # every view showed rows somewhere
    columns = {column for declared in VIEW_COLUMNS.values() for column in declared}
    assert columns <= set(COLUMN_MEANINGS) | set(FIELD_MEANINGS)
    assert set(COLUMN_MEANINGS) <= columns
    assert set(COLUMN_TYPES) == columns | set(RECEIVED_ROW)  # every column typed, and nothing else
