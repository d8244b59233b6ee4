"""Cucumber JSON from results.json: what pytest-bdd's --cucumberjson cannot give under xdist.

Every step carries its real duration (nanoseconds, as Cucumber writes
them), its data table as ``rows`` and its docstring as ``doc_string``;
feature tags stand on the feature, scenario tags on the scenario; ids are
Cucumber's (``feature-name;scenario-name``). Cucumber has no word for five
of the kit's seven statuses, so they map as follows (README, "Statuses"),
and every scenario keeps its own status in ``sbtck_status``:

    passed            every step passed
    failed            the failing step failed, with the kit's message; the steps after it skipped
    error             the same, the message starting "error: "
    not applicable    every step skipped
    expected failure  the failing step pending, with the reason; the steps after it skipped
    unexpected pass   every step passed, and an after hook failed saying why
    differs           the step that came out otherwise skipped, its output saying how; the steps after it skipped

A scenario that failed before a rerun passed it (flaky) carries the tag
``@flaky``, and its description tells the earlier attempts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sbtck.reports.results import (
    DIFFERS,
    ERROR,
    EXPECTED_FAILURE,
    FAILED,
    LEFT_OUT,
    NOT_APPLICABLE,
    PASSED,
    UNEXPECTED_PASS,
    ScenarioRecord,
    StepRecord,
)

NS = 1_000_000_000
# how a Cucumber reader ranks step results when it sums a scenario up
_RANK = ["failed", "pending", "skipped", "passed"]
# the tag of a scenario that passed only on a rerun
FLAKY = "flaky"
# what stands above the end of the implementation's stderr that a failed step carries
STDERR_HEADING = "the end of the implementation's stderr:"


def slug(text: str) -> str:
    return "-".join(text.lower().split()).replace(";", "")


def _failing(record: ScenarioRecord) -> int | None:
    """The index of the step that carries a failure, error, expected failure or difference; None when none can."""
    if record.status not in (FAILED, ERROR, EXPECTED_FAILURE, DIFFERS):
        return None
    line = (record.failure or {}).get("line")
    for i, step in enumerate(record.steps):
        if step.line == line:
            return i
    # a failure outside the steps (set-up, tear-down) is blamed on the first step that did not pass
    return next((i for i, step in enumerate(record.steps) if step.status != "passed"), None)


def _step_status(record: ScenarioRecord, index: int, failing: int | None) -> str:
    if record.status == NOT_APPLICABLE:
        return "skipped"
    if index == failing:
        return {EXPECTED_FAILURE: "pending", DIFFERS: "skipped"}.get(record.status, "failed")
    # a check left out passed: what it would look at is what this implementation does not report
    return "passed" if record.steps[index].status in ("passed", LEFT_OUT) else "skipped"


def _message(record: ScenarioRecord) -> str:
    message = str((record.failure or {}).get("message", ""))
    if record.status == ERROR:
        return f"error: {message}"
    if record.status == EXPECTED_FAILURE:
        return f"expected failure ({record.reason}): {message}"
    return message


def _step(record: ScenarioRecord, index: int, failing: int | None) -> dict[str, Any]:
    step: StepRecord = record.steps[index]
    status = _step_status(record, index, failing)
    result: dict[str, Any] = {"status": status, "duration": int(step.duration_s * NS)}
    if status in ("failed", "pending"):
        result["error_message"] = _message(record)
    out: dict[str, Any] = {
        "keyword": step.keyword + " ",
        "name": step.text,
        "line": step.line,
        "match": {"location": f"{record.feature_path}:{step.line}"},
        "result": result,
    }
    if step.left_out:
        out["output"] = [f"not checked: {step.left_out}"]
    if index == failing and record.status == DIFFERS:
        out["output"] = [f"differs ({record.reason}): {(record.failure or {}).get('message', '')}"]
    stderr = (record.failure or {}).get("stderr")
    if index == failing and stderr:
        out["output"] = [*out.get("output", []), f"{STDERR_HEADING}\n{stderr}"]
    if step.datatable:
        out["rows"] = [{"cells": list(row)} for row in step.datatable]
    if step.docstring is not None:
        out["doc_string"] = {"value": step.docstring, "content_type": "", "line": step.line + 1}
    return out


def _scenario(record: ScenarioRecord, feature_id: str) -> dict[str, Any]:
    failing = _failing(record)
    own_tags = [t for t in record.tags if t not in record.feature_tags]
    element: dict[str, Any] = {
        "id": f"{feature_id};{slug(record.name)}",
        "keyword": "Scenario Outline" if record.example else "Scenario",
        "name": record.name,
        "line": record.line,
        "type": "scenario",
        "description": _attempts(record),
        "tags": [{"name": "@" + t, "line": record.line - 1} for t in [*own_tags, *([FLAKY] if record.flaky else [])]],
        "steps": [_step(record, i, failing) for i in range(len(record.steps))],
        "sbtck_status": record.status,
    }
    hook: tuple[str, str] | None = None
    if record.status == UNEXPECTED_PASS:
        hook = "failed", f"unexpected pass: {record.reason}, but it passed"
    elif failing is None and record.status in (FAILED, ERROR, EXPECTED_FAILURE):
        hook = ("pending" if record.status == EXPECTED_FAILURE else "failed"), _message(record)
    if hook is not None:
        result = {"status": hook[0], "duration": 0, "error_message": hook[1]}
        element["after"] = [{"match": {"location": "sbtck"}, "result": result}]
    return element


def _attempts(record: ScenarioRecord) -> str:
    """Cucumber JSON has no reruns: a flaky scenario carries the tag @flaky, and its earlier attempts are told in its
    description."""
    return "\n".join(
        f"attempt {n} {earlier.get('status', '')}: {(str(earlier.get('message', '')).splitlines() or [''])[0]}"
        for n, earlier in enumerate(record.earlier_failures, 1)
    )


def scenario_status(element: dict[str, Any]) -> str:
    """A scenario's status as Cucumber readers sum it up: its worst step or hook."""
    results = [s["result"]["status"] for s in element["steps"]] + [
        h["result"]["status"] for h in element.get("after", [])
    ]
    return min(results, key=lambda s: _RANK.index(s) if s in _RANK else 0) if results else PASSED


def render(records: list[ScenarioRecord]) -> list[dict[str, Any]]:
    features: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: (r.feature_path, r.line)):
        feature = features.setdefault(
            record.feature_path,
            {
                "id": slug(record.feature_name),
                "uri": record.feature_path,
                "keyword": "Feature",
                "name": record.feature_name,
                "line": 1,
                "description": "",
                "tags": [{"name": "@" + t, "line": 1} for t in record.feature_tags],
                "elements": [],
            },
        )
        feature["elements"].append(_scenario(record, feature["id"]))
    return list(features.values())


def write(records: list[ScenarioRecord], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(render(records), indent=1))
    return path
