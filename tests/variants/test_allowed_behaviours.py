"""Every behaviour the documents allow passes the suite: each broker of allowed.py, as the opposite choices do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import sbtck
from tests.variants import allowed


@pytest.mark.parametrize("name", allowed.ALLOWED)
def test_the_suite_passes_on_an_allowed_behaviour(name: str, tmp_path: Path) -> None:
    run = sbtck("--iut", f"python:tests.variants.allowed:{name}", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert set(run.statuses().values()) == {"passed"}


def test_a_black_box_passes_every_scenario_and_each_checks_something(tmp_path: Path) -> None:
    """Without decision_trace no scenario is not applicable, and each still checks what a real broker shows."""
    run = sbtck("--iut", "python:tests.fakes.partial:black_box", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    scenarios = run.results()["scenarios"]
    assert {s["status"] for s in scenarios} == {"passed"}
    assert all(s["checks"]["whole"] + s["checks"]["in part"] >= 1 for s in scenarios), [
        s["id"] for s in scenarios if s["checks"]["whole"] + s["checks"]["in part"] == 0
    ]
    # the report says which checks were left out and why
    left_out = [step for s in scenarios for step in s["steps"] if step["status"] == "left out"]
    assert left_out and all("does not declare decision_trace" in step["left_out"] for step in left_out)
    assert sum(s["checks"]["in part"] for s in scenarios) > 0
