"""The features follow the house style: a lint that fails on what pytest-bdd would silently accept."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gherkin.parser import Parser

from sbtck import catalogue
from sbtck.catalogue import RULE_ID
from sbtck.iut.profile import CAPABILITIES
from sbtck.observations import ECHOES, FIELDS, KINDS, LISTS, REASONS, RULE_FIELDS, VALUES, Kind
from sbtck.reports.results import INFORMATIVE
from sbtck.steps import phrases
from sbtck.views import VIEW_COLUMNS

FEATURES = Path(__file__).resolve().parents[2] / "features"
FILE_NAME = re.compile(r"^\d{2}_[a-z0-9_]+\.feature$")
NUMBERED = re.compile(r"^\[(\d+)\] \S")
KNOWN_TAGS = {INFORMATIVE} | {f"requires-{cap.replace('_', '-')}" for cap in CAPABILITIES}


@dataclass
class Problem:
    where: str
    what: str


def lint(path: Path, text: str) -> list[Problem]:
    doc: dict[str, Any] = dict(Parser().parse(text))
    feature: dict[str, Any] | None = doc.get("feature")
    if feature is None:
        return [Problem(str(path), "no Feature")]
    problems: list[Problem] = []
    rules = catalogue.load().rules
    if not FILE_NAME.match(path.name):
        problems.append(Problem(str(path), "feature files are named NN_words.feature"))
    feature_tags = {t["name"].lstrip("@") for t in feature.get("tags", [])}
    seen: dict[str, int] = {}
    number = 0
    for child in feature["children"]:
        scenario = child.get("scenario")
        if scenario is None:
            continue
        where = f"{path}:{scenario['location']['line']}"
        name = scenario["name"]
        if name in seen:
            problems.append(
                Problem(where, f"scenario name {name!r} also at line {seen[name]}: pytest-bdd would merge them")
            )
        seen[name] = scenario["location"]["line"]
        match = NUMBERED.match(name)
        number += 1
        if match is None or int(match.group(1)) != number:
            problems.append(Problem(where, f"scenario {name!r} should be numbered [{number}]"))
        tags = feature_tags | {t["name"].lstrip("@") for t in scenario.get("tags", [])}
        for tag in tags:
            if RULE_ID.match(tag) and tag not in rules:
                problems.append(Problem(where, f"@{tag} names no rule of spec/rules.yaml"))
            elif not RULE_ID.match(tag) and tag not in KNOWN_TAGS:
                problems.append(Problem(where, f"unknown tag @{tag}"))
        if not any(RULE_ID.match(t) for t in tags) and INFORMATIVE not in tags:
            problems.append(Problem(where, "a scenario names the rules it checks (@ACT-06) or is @informative"))
        whens = [s for s in scenario["steps"] if s["keyword"].strip() == "When"]
        if len(whens) > 1:
            problems.append(Problem(where, "one When per scenario"))
        for step in scenario["steps"]:
            problems += [Problem(f"{path}:{step['location']['line']}", what) for what in observation_problems(step)]
    return problems


def _kind(text: str) -> str | None:
    kind = text.strip().replace(" ", "_")
    return kind if kind in KINDS else None


def _echo(kind: str) -> str:
    return f"{kind} only echoes a fault the kit made: check what the broker does about it instead"


def observation_problems(step: dict[str, Any]) -> list[str]:
    """A log table or count names declared event kinds and fields only (sbtck/observations.py)."""
    text = step["text"]
    if phrases.LOG_COUNTS.template.match(text):
        values = phrases.LOG_COUNTS.template.match(text) or {}
        kind = _kind(str(values["event"]))
        if kind is None:
            return [f"no event kind {values['event']!r} is declared"]
        if kind in ECHOES:
            return [_echo(kind)]
        field = values.get("field")
        if field is not None and field not in FIELDS[kind]:
            return [f"{values['event']!r} events have no field {field!r}; they have {', '.join(FIELDS[kind])}"]
        if field is not None and _unknown(field, str(values["value"]), kind):
            return [f"{field} {values['value']!r} is none of its values"]
        return []
    table = [[c["value"] for c in row["cells"]] for row in step.get("dataTable", {}).get("rows", [])]
    for phrase, view, columns in (
        (phrases.MONITOR_ROW, "sys.dm_broker_queue_monitors", [row[0] for row in table]),
        (phrases.TASK_ROWS, "sys.dm_broker_activated_tasks", table[0] if table else []),
    ):
        if phrase.template.match(text):
            return [f"{view} has no column {col!r}" for col in columns if col not in VIEW_COLUMNS[view]]
    if not phrases.LOG_SHOWS.template.match(text) or "dataTable" not in step:
        return []
    header, *rows = [[c["value"] for c in row["cells"]] for row in step["dataTable"]["rows"]]
    if "event" not in header:
        return []  # the step itself reports this as the scenario's error
    found: list[str] = []
    kinds = []
    for row in rows:
        kind = _kind(row[header.index("event")])
        if kind is None:
            found.append(f"no event kind {row[header.index('event')]!r} is declared")
        else:
            kinds.append(kind)
            if kind in ECHOES:
                found.append(_echo(kind))
    for column in header:
        if column not in ("second", "event") and kinds and not any(column in FIELDS[k] for k in kinds):
            found.append(f"column {column!r} is a field of none of the kinds in the table")
    for row in rows:
        kind = _kind(row[header.index("event")])
        for column, cell in zip(header, row, strict=True):
            if kind is not None and column not in ("second", "event") and column not in FIELDS[kind] and cell != "NULL":
                found.append(f"{kind} has no field {column!r}, so its cell reads NULL, not {cell!r}")
            else:
                found += [
                    f"{column} {v!r} is none of its values" for v in cell.split(" or ") if _unknown(column, v, kind)
                ]
    return found


def _unknown(field: str, value: str, kind: str | None = None) -> bool:
    """Is VALUE outside the declared values of FIELD (observations.VALUES, REASONS; rule ids for rule and step)?"""
    if value == "NULL":
        return False
    if field in RULE_FIELDS:
        return value not in catalogue.load().rules
    if field == "reason" and kind in REASONS:
        return value not in REASONS[kind]
    if field not in VALUES:
        return False
    # a list's cell names its members, "a, b", or "(none)"
    members = [] if value == "(none)" else value.split(", ") if field in LISTS else [value]
    return any(member not in VALUES[field] for member in members)


FILES = sorted(FEATURES.rglob("*.feature"))


def test_there_are_features() -> None:
    assert len(FILES) >= 6


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(FEATURES)))
def test_feature_follows_house_style(path: Path) -> None:
    assert lint(path, path.read_text()) == []


BAD = """@ACT-06
Feature: bad
  Scenario: [1] same
    Given the topology "activation"
  @NOPE-1
  Scenario: [1] same
    When time passes to second 1
    When time passes to second 2
  @wip
  Scenario: [4] untagged
    Given the topology "activation"
    Then the log shows exactly:
      | second | event             | reson |
      | 0      | procedure startd  | NULL  |
    And the log has no "procedure started" event where reson is "x"
"""


def test_lint_catches_every_kind_of_problem() -> None:
    found = [problem.what for problem in lint(Path("features/x/bad.feature"), BAD)]
    assert any("pytest-bdd would merge" in w for w in found)
    assert any("@NOPE-1 names no rule" in w for w in found)
    assert any("one When per scenario" in w for w in found)
    assert any("unknown tag @wip" in w for w in found)
    assert any("should be numbered [2]" in w for w in found)
    assert any("named NN_words" in w for w in found)
    assert "no event kind 'procedure startd' is declared" in found
    assert any(w.startswith("'procedure started' events have no field 'reson'; they have database") for w in found)


def test_a_log_table_column_must_be_a_field_of_its_kinds() -> None:
    rows = [["event", "reson"], ["procedure started", "x"]]
    step = {
        "text": "the log shows exactly:",
        "dataTable": {"rows": [{"cells": [{"value": v} for v in row]} for row in rows]},
    }
    assert observation_problems(step) == [
        "column 'reson' is a field of none of the kinds in the table",
        "procedure_started has no field 'reson', so its cell reads NULL, not 'x'",
    ]
    echo = [["event", "instance"], ["task handlers failed", "sql1"]]
    step["dataTable"] = {"rows": [{"cells": [{"value": v} for v in row]} for row in echo]}
    assert observation_problems(step) == [_echo(Kind.TASK_HANDLERS_FAILED)]
    count = {"text": 'the log has no "instance unreachable" event'}
    assert observation_problems(count) == [_echo(Kind.INSTANCE_UNREACHABLE)]
    monitor = {
        "text": 'sys.dm_broker_queue_monitors shows for queue "Q":',
        "dataTable": {"rows": [{"cells": [{"value": "stat"}, {"value": "INACTIVE"}]}]},
    }
    assert observation_problems(monitor) == ["sys.dm_broker_queue_monitors has no column 'stat'"]


def test_a_log_table_cell_must_be_one_of_its_fields_values() -> None:
    rows = [
        ["event", "trigger", "rule"],
        ["activation necessary", "message arived", "ACT-6"],
        ["activation necessary", "RECEIVE or rollback", "ACT-06 or ACT-07"],
    ]
    withheld = [["event", "reason"], ["activation withheld", "MAX_QUEUE_READER"], ["dispatcher deleted", "stale"]]
    step = {
        "text": "the log shows exactly:",
        "dataTable": {"rows": [{"cells": [{"value": v} for v in row]} for row in rows]},
    }
    assert observation_problems(step) == [
        "trigger 'message arived' is none of its values",
        "rule 'ACT-6' is none of its values",
    ]
    step["dataTable"] = {"rows": [{"cells": [{"value": v} for v in row]} for row in withheld]}
    assert observation_problems(step) == ["reason 'MAX_QUEUE_READER' is none of its values"]


def test_untagged_scenario_is_refused() -> None:
    text = 'Feature: f\n  Scenario: [1] nothing\n    Given the topology "activation"\n'
    assert [problem.what for problem in lint(Path("features/a/01_f.feature"), text)] == [
        "a scenario names the rules it checks (@ACT-06) or is @informative"
    ]
