"""Every mutant that survives the suite is killed or given its reason (issue 44 item 4, tests/engine/mutation/).

scripts/mutation.sh records a module's survivors in tests/engine/mutation/MODULE.json; survivors.yaml there says
why each cannot be killed. A survivor without a reason fails here (write the scenario that kills it, from the
documents, or its reason), so does a reason that names no survivor, or a line the module no longer has (run the
module's mutants again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

FOLDER = Path(__file__).parent / "mutation"
KINDS = {"equivalent", "another reading", "unreached", "the stage's", "the kit's"}
RECORDED = sorted(FOLDER.glob("*.json"))


def _reasons() -> list[dict[str, Any]]:
    return list(yaml.safe_load((FOLDER / "survivors.yaml").read_text()))


def _among(value: str | None, allowed: str | list[str] | None) -> bool:
    return value in allowed if isinstance(allowed, list) else value == allowed


def _reason_for(module: str, survivor: dict[str, Any], reasons: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next(
        (
            r
            for r in reasons
            if r["module"] == module
            and _among(survivor["function"], r["function"])
            and _among(survivor["before"], r["before"])
            and _among(survivor["after"], r["after"])
        ),
        None,
    )


def test_the_reasons_are_of_the_declared_kinds() -> None:
    for reason in _reasons():
        assert reason["kind"] in KINDS and reason["why"].strip(), reason


@pytest.mark.parametrize("recorded", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_survivor_has_its_reason(recorded: Path) -> None:
    run = json.loads(recorded.read_text())
    reasons = _reasons()
    unexplained = [s for s in run["survivors"] if _reason_for(run["module"], s, reasons) is None]
    assert not unexplained, "survivors with no scenario that kills them and no reason:\n" + "\n".join(
        f"  line {s['line']} ({s['function']}): {s['before']}  =>  {s['after']}" for s in unexplained
    )
    assert run["killed"] + run["survived"] <= run["mutants"] and run["survived"] == len(run["survivors"])


def test_every_reason_names_a_survivor_of_a_line_the_module_still_has() -> None:
    runs = [json.loads(p.read_text()) for p in RECORDED]
    for reason in _reasons():
        named = [s for run in runs if run["module"] == reason["module"] for s in run["survivors"]]
        assert any(_reason_for(reason["module"], s, [reason]) for s in named), f"no survivor is so: {reason}"
        source = {line.strip() for line in (ROOT / reason["module"]).read_text().splitlines()}
        befores = reason["before"] if isinstance(reason["before"], list) else [reason["before"]]
        gone = [b for b in befores if b not in source]
        assert not gone, f"{reason['module']} no longer has {gone}: run its mutants again (scripts/mutation.sh)"
