"""Every behaviour the documents allow passes the suite: each broker of allowed.py, as the opposite choices do.

Each is a whole run of the suite: a day's sample of them runs, another each day, and every one with
``SBTCK_TEST_SAMPLE=all`` (tests/sampling.py). The stage's check of each (tests/workloads/test_worlds.py) runs every
day.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sbtck.reports import results
from tests.helpers import sbtck
from tests.sampling import sample
from tests.variants import allowed

PER_DAY = 24


@pytest.mark.parametrize("name", sample(allowed.ALLOWED, PER_DAY, "allowed behaviours"))
def test_the_suite_passes_on_an_allowed_behaviour(name: str, tmp_path: Path) -> None:
    run = sbtck("--iut", f"python:tests.variants.allowed:{name}", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    scenarios = run.results()["scenarios"]
    assert {s["status"] for s in scenarios if results.INFORMATIVE not in s["tags"]} == {results.PASSED}
    # an informative scenario shows what the reference engine chose where the documents are silent
    assert {s["status"] for s in scenarios if results.INFORMATIVE in s["tags"]} <= {results.PASSED, results.DIFFERS}


def test_an_informative_scenario_that_comes_out_otherwise_differs_and_the_run_conforms(tmp_path: Path) -> None:
    run = sbtck("--iut", "python:tests.variants.allowed:connects_on_the_next_notification", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    differs = {s["id"]: s for s in run.results()["scenarios"] if s["status"] == results.DIFFERS}
    assert list(differs) == [
        "features/periodic/04_transport.feature::[8] The reference engine connects at once when a message is sent "
        "to an unsuppressed destination"
    ]
    (scenario,) = differs.values()
    assert "connection attempt" in scenario["failure"]["message"] and "@informative" in scenario["reason"]
    assert "sbtck: conforms" in run.output


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
