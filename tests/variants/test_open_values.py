"""Every scenario holds for any value of the open parameters: the suite on the reference at each end of each range.

The reference engine runs with the value and declares it (tests/fakes/tuned.py),
connecting at once or only when notified (PER-2A leaves that open); the
scenarios write their times from the declared values, so all must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sbtck import catalogue
from sbtck.reports import results as r
from tests.helpers import Run, kit

OPEN = {name: param for name, param in catalogue.load().params.items() if not param.fixed}
CASES = [
    (name, value)
    for name, param in OPEN.items()
    if param.low is not None and param.high is not None
    for value in sorted({int(param.low), int((param.low + param.high) // 2), int(param.high)})
]


@pytest.mark.parametrize("factory", ["tuned", "tuned_connecting_when_notified"])
@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v}" for n, v in CASES])
def test_the_suite_passes_on_the_reference_with_the_value(
    name: str, value: int, factory: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBTCK_TUNED", f"{name}={value}")
    proc = kit("run", "--iut", f"python:tests.fakes.tuned:{factory}", "--out", str(tmp_path))
    run = Run(proc.returncode, proc.stdout + proc.stderr, tmp_path)
    assert run.code == 0, run.output[-3000:]
    scenarios = run.results()["scenarios"]
    assert {s["status"] for s in scenarios if r.INFORMATIVE not in s["tags"]} == {r.PASSED}
    assert run.results()["profile"]["params"][name] == value
