"""Every report is held against the world: an implementation reporting what cannot be fails or errs in every
scenario where it does so, and the failure names the invariant (sbtck/iut/log_check.py, issue 44).

Each hostile implementation is the reference with one kind of impossible report added (tests/fakes/phantoms.py).
A scenario whose reported log shows the impossible thing must not pass; its failure names the invariant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import sbtck

# scenarios of every area with messages, procedures, notifications and routing
TAGS = "ACT-06 or ACT-09 or ACT-12 or RTM-3 or RTL-1 or PER-1C"
Event = dict[str, Any]
Shows = Callable[[list[Event]], bool]


def _any(test: Callable[[Event], bool]) -> Shows:
    return lambda events: any(test(e) for e in events)


CASES: dict[str, tuple[Shows, str, str]] = {
    # fake: (what its log shows where it says the impossible, the status, the invariant named)
    "phantom_queue": (_any(lambda e: e.get("queue") == "NoSuchQ"), "failed", "invariant: entities"),
    "phantom_instance": (_any(lambda e: e.get("instance") == "sql99"), "failed", "invariant: entities"),
    "unknown_kind": (_any(lambda e: e["kind"] == "x"), "error", "which the protocol does not declare"),
    "reversed_time": (_any(lambda e: e.get("hostile") == "reversed"), "failed", "invariant: time order"),
    "garbage_fields": (_any(lambda e: e.get("trigger") == "the moon"), "error", "invariant: declared values"),
    "wrong_types": (_any(lambda e: e.get("spid") == "lots"), "error", "invariant: declared types"),
    "never_sent": (_any(lambda e: e.get("message_sequence_number") == 9999), "failed", "nothing arrives unsent"),
}


@pytest.mark.parametrize("fake", CASES)
def test_an_impossible_report_fails_every_scenario_it_is_in(fake: str, tmp_path: Path) -> None:
    shows, status, invariant = CASES[fake]
    run = sbtck("--iut", f"python:tests.fakes.phantoms:{fake}", "--tags", TAGS, out=tmp_path)
    scenarios = run.results()["scenarios"]
    shown = [s for s in scenarios if shows(s["events"])]
    assert shown, f"{fake} said nothing impossible in {len(scenarios)} scenarios: the case tests nothing"
    for scenario in shown:
        assert scenario["status"] == status, f"{scenario['id']}: {scenario['status']}"
        assert invariant in str(scenario["failure"]), f"{scenario['id']}: {scenario['failure']}"
    assert run.code == 1


@pytest.mark.parametrize("fake", ["phantom_queue", "unknown_kind", "never_sent"])
def test_the_stage_fails_a_world_with_an_impossible_report_naming_the_invariant(fake: str) -> None:
    """The stage holds an implementation's reports against the world as the suite does (one LogCheck)."""
    from sbtck.iut.loader import factory_for
    from sbtck.reports.results import FAILED
    from sbtck.workloads.stage import REPORTED_IMPOSSIBLE, Checker

    checker = Checker(factory_for(f"python:tests.fakes.phantoms:{fake}"), differential=True)
    try:
        outcomes = [checker.check(seed) for seed in range(6)]
    finally:
        checker.close()
    failed = [o for o in outcomes if o.outcome == FAILED]
    assert failed, [o.outcome for o in outcomes]
    assert all(REPORTED_IMPOSSIBLE in o.rules for o in failed), failed[0].detail
    # the detail names the first five findings: the invariant is among them where no other rule came first
    assert any("(invariant: " in o.detail for o in failed), failed[0].detail
