"""Cucumber JSON from results.json: what pytest-bdd's --cucumberjson cannot give under xdist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sbtck.fixtures.results import PASSED, ScenarioRecord

STEP_STATUS = {"passed": "passed", "failed": "failed", "not run": "skipped"}


def _scenario(record: ScenarioRecord) -> dict[str, Any]:
    failed_line = record.failure.get("line") if record.failure else None
    steps = []
    for step in record.steps:
        status = STEP_STATUS.get(step.status, "skipped")
        result: dict[str, Any] = {"status": status, "duration": 0}
        if step.line == failed_line and record.failure:
            result["error_message"] = str(record.failure.get("message", ""))
        steps.append(
            {"keyword": step.keyword + " ", "name": step.text, "line": step.line, "match": {}, "result": result}
        )
    return {
        "id": record.id,
        "keyword": "Scenario",
        "name": record.name,
        "line": record.line,
        "type": "scenario",
        "description": "",
        "tags": [{"name": "@" + t, "line": record.line} for t in record.tags],
        "steps": steps,
        "sbtck_status": record.status,
        "sbtck_passed": record.status == PASSED,
    }


def render(records: list[ScenarioRecord]) -> list[dict[str, Any]]:
    features: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: (r.feature_path, r.line)):
        feature = features.setdefault(
            record.feature_path,
            {
                "id": record.feature_path,
                "uri": record.feature_path,
                "keyword": "Feature",
                "name": record.feature_name,
                "line": 1,
                "description": "",
                "tags": [],
                "elements": [],
            },
        )
        feature["elements"].append(_scenario(record))
    return list(features.values())


def write(records: list[ScenarioRecord], path: Path) -> Path:
    path.write_text(json.dumps(render(records), indent=1))
    return path
