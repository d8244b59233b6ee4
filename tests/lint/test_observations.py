"""Event kinds are declared once (sbtck/observations.py) and the engine emits no other."""

from __future__ import annotations

import ast
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
            for f in VALUES.keys() & event.keys():
                found = event[f] if isinstance(event[f], list) else [event[f]]
                unknown |= {(f, value) for value in found if value not in VALUES[f]}
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


KIT = ("sbtck", "engine", "iut", "steps", "workloads", "reports")


def _names_a_kind(node: ast.expr) -> bool:
    from sbtck.observations import KINDS

    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id == "Kind"
    return isinstance(node, ast.Constant) and node.value in KINDS


def test_no_table_keyed_by_event_kind_outside_the_one_record() -> None:
    """What the kit says about a kind lives in its record (sbtck/observations.py): a dict written with kinds for
    keys anywhere else is a second place for it. A dict whose keys merely include a word that is also a kind (a
    view row's ``acknowledged``) names no kind by ``Kind.X`` and is not all kinds."""
    from tests.helpers import ROOT

    found = []
    for folder in KIT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() == "sbtck/observations.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                keys = [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) else []
                by_kind = any(isinstance(k, ast.Attribute) and _names_a_kind(k) for k in keys)
                keyed = keys and (by_kind or all(_names_a_kind(k) for k in keys))
                if keyed or (isinstance(node, ast.DictComp) and _names_a_kind(node.key)):
                    found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    assert found == []


def test_the_lint_finds_a_table_keyed_by_kind() -> None:
    tree = ast.parse('WAY = {Kind.MESSAGE_SENT: "sent"}\nOTHER = {"message_sent": 1, "message_arrived": 2}')
    dicts = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)]
    assert all(any(_names_a_kind(k) for k in d.keys if k is not None) for d in dicts)
    assert not _names_a_kind(ast.parse("'dialog'", mode="eval").body)


def test_every_field_of_every_kind_and_every_view_column_has_one_comparison_class() -> None:
    from sbtck.observations import CLASSES, EXACT, REASONING, RECORDS, REPORT
    from sbtck.views import COLUMN_VALUES, VIEW_COLUMNS, column_class

    assert [(k, f.name) for k, r in RECORDS.items() for f in r.fields if f.compared not in CLASSES] == []
    # a closed value set belongs to a string compared exactly or as reasoning
    assert [
        (k, f.name)
        for k, r in RECORDS.items()
        for f in r.fields
        if f.values and (f.compared, f.type) not in {(EXACT, "string"), (EXACT, "list"), (REASONING, "string")}
    ] == []
    # a report's moment is stated in words, or left open; an effect has none
    assert [k for k, r in RECORDS.items() if r.moment is not None and r.nature != REPORT] == []
    assert [k for k, r in RECORDS.items() if r.moment == ""] == []
    columns = {c for cs in VIEW_COLUMNS.values() for c in cs}
    assert [c for c in columns if column_class(c) not in CLASSES] == []
    assert set(COLUMN_VALUES) <= columns
    # and each record's fields are its own, once
    assert [k for k, r in RECORDS.items() if len(set(r.field_names)) != len(r.field_names)] == []
    assert all(k == r.kind for k, r in RECORDS.items())


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values()), set())
    if isinstance(value, (list, tuple)):
        return set().union(*(_strings(v) for v in value), set())
    return set()


def _of_the_scenario(value: str, names: set[str], form: str) -> bool:
    if value in names:
        return True
    for option in form.split(" or ") if form else ():
        pattern = re.escape(option).replace("NAME", "(.+)").replace("QUEUE", "(.+)").replace("N", "[0-9]+")
        pattern = pattern.replace("\\#", "#")
        found = re.fullmatch(pattern, value)
        if found is not None and all(g in names for g in found.groups()):
            return True
    return False


def test_every_value_of_an_exact_field_the_reference_produces_is_listed_in_protocol_md() -> None:
    """An exact string field holds a name the scenario gave, a string of its declared form, or one of the values
    docs/protocol.md lists: collected from generated worlds of every area, their events and, in the middle of
    them, every view's rows."""
    from sbtck import contract
    from sbtck.iut.reference import reference
    from sbtck.observations import EXACT, REASONING, RECORDS
    from sbtck.views import COLUMN_VALUES, column_class
    from sbtck.workloads.generate import generate
    from sbtck.workloads.trace import execute
    from tests.helpers import ROOT

    doc = (ROOT / "docs" / "protocol.md").read_text()
    unlisted: set[tuple[str, str, str]] = set()
    for seed in range(60):
        world = generate(seed)
        names = _strings(world.topology) | _strings(world.script)
        names |= {name.upper() for name in names}  # an address compares without case
        implementation = reference()
        for index, op in enumerate(world.script):
            for e in execute(op, implementation)["events"]:
                for f in RECORDS[e["kind"]].fields:
                    if f.compared not in (EXACT, REASONING) or f.name in ("rule", "step", "rows"):
                        continue  # rule ids: the catalogue's (above); a row's strings: its declared fields'
                    for value in _strings(e.get(f.name)):
                        if f.values and value in f.values and f"`{value}`" in doc:
                            continue
                        if not f.values and _of_the_scenario(value, names, f.form):
                            continue
                        unlisted.add((e["kind"], f.name, value))
            if seed % 3 or index % 5:
                continue
            for view in contract.VIEWS:
                command = contract.QueryView(op["at_ms"], view, None, None)
                for row in implementation.execute(command).result.get("rows", []):
                    for column, value in row.items():
                        if column_class(column) != EXACT or not isinstance(value, str) or value in names:
                            continue
                        if value in COLUMN_VALUES.get(column, ()) and f"`{value}`" in doc:
                            continue
                        unlisted.add((view, column, value))
    # The reference's placeholder for a TRANSPORT route whose service name is no address (issue 43, item 3: the
    # generator is to keep out of it, or the documents to define it); until then the one value known unlisted.
    assert unlisted - {(Kind.CONNECTION_ATTEMPT, "address", "NONE")} == set()
