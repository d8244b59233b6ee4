"""What `sbtck workload` exits with, as `sbtck run` does: a failed world is 1, no world that applied is 2."""

from __future__ import annotations

import pytest

from sbtck.reports.results import ERROR, FAILED, NOT_APPLICABLE, PASSED
from sbtck.workload_cli import exit_status


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ({PASSED: 10}, 0),
        ({PASSED: 9, NOT_APPLICABLE: 1}, 0),
        ({PASSED: 9, FAILED: 1}, 1),
        ({ERROR: 1}, 1),
        ({NOT_APPLICABLE: 10}, 2),
        ({}, 2),
    ],
)
def test_the_exit_status_says_the_verdict(outcomes: dict[str, int], status: int) -> None:
    failed = outcomes.get(FAILED, 0) + outcomes.get(ERROR, 0)
    assert exit_status({"failed_worlds": failed, "outcomes": outcomes}) == status


def test_nothing_ran_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    exit_status({"failed_worlds": 0, "outcomes": {NOT_APPLICABLE: 3}})
    assert "nothing ran" in capsys.readouterr().out
