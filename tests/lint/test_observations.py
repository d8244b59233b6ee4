"""Event kinds are declared once (sbtck/observations.py) and the engine emits no other."""

from __future__ import annotations

import re

from sbtck.observations import Kind
from sbtck.workloads.differential import RULES_OF_EVENT
from tests.lint.test_layers import KNOWN


def test_every_declared_kind_is_emitted_by_the_engine() -> None:
    # EventLog.emit takes a Kind, so mypy holds the other direction
    engine = "\n".join(path.read_text() for module, path in KNOWN.items() if module.startswith("sbtck.engine"))
    assert [kind.name for kind in Kind if not re.search(rf"\bKind\.{kind.name}\b", engine)] == []


def test_the_differential_check_maps_only_declared_kinds() -> None:
    assert all(isinstance(kind, Kind) for kind in RULES_OF_EVENT)


def test_events_carry_plain_strings() -> None:
    # xdist, pickle and JSON must see the kind on the wire, not the enum that names it
    from tests.engine.world import broker

    b = broker()
    b.begin_dialog(0, "D1", "sql1", "shop", "Initiator", "ManualService")
    b.send(0, "D1")
    events = b.drain_events()
    assert events and all(type(event.kind) is str for event in events)


def test_every_kind_has_its_area() -> None:
    from sbtck.contract import CAPABILITIES
    from sbtck.observations import AREA

    assert set(AREA) == set(Kind)
    assert {capability for needed in AREA.values() for capability in needed} <= set(CAPABILITIES)


def test_the_engine_reports_only_declared_fields_and_every_field_says_what_it_is() -> None:
    from sbtck.iut.reference import reference
    from sbtck.observations import FIELD_MEANINGS, FIELDS
    from sbtck.workloads.generate import generate
    from sbtck.workloads.trace import run

    undeclared = set()
    for seed in range(150):
        for event in run(generate(seed), reference()).events():
            undeclared |= {
                (event["kind"], f) for f in set(event) - {"kind", "at_ms"} - set(FIELDS[Kind(event["kind"])])
            }
    assert undeclared == set()
    used = {field for fields in FIELDS.values() for field in fields}
    assert used == set(FIELD_MEANINGS)
