"""Helpers the project's tests share: running the kit as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    code: int
    output: str
    out: Path

    def results(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "results.json").read_text())
        return data

    def outcome(self) -> dict[str, object]:
        """Per scenario, its status and event log: what must be equal across ways of plugging in."""
        return {s["id"]: (s["status"], s["events"]) for s in self.results()["scenarios"]}

    def statuses(self) -> dict[str, str]:
        return {s["id"]: s["status"] for s in self.results()["scenarios"]}

    def unexpected(self, wrong: dict[str, str], fine: tuple[str, ...] = ("passed", "differs")) -> list[str]:
        """The scenarios whose status is not FINE, less those WRONG lists (a part of their id: why the documents
        make the broker fail it) that failed; and each listed one that ran and did not fail, so a list only
        shrinks. Empty when the run is as expected."""
        statuses = self.statuses()
        listed = {sid: status for sid, status in statuses.items() if any(part in sid for part in wrong)}
        found = [
            f"{sid}: {status}"
            for sid, status in statuses.items()
            if status not in fine and not (sid in listed and status == "failed")
        ]
        return found + [f"{sid}: listed as failing, but {s}" for sid, s in listed.items() if s != "failed"]


def scenarios_tagged(tag: str) -> int:
    """How many of the kit's scenarios carry TAG, on themselves or on their feature."""
    from gherkin.parser import Parser

    count = 0
    for path in (ROOT / "features").rglob("*.feature"):
        doc: dict[str, Any] = dict(Parser().parse(path.read_text()))
        feature = doc["feature"]
        own = {t["name"] for t in feature["tags"]}
        for child in feature["children"]:
            scenario = child.get("scenario")
            if scenario is not None and f"@{tag}" in own | {t["name"] for t in scenario["tags"]}:
                count += 1
    return count


def kit(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``sbtck ARGS`` in a child process, with this checkout importable (for tests.variants).

    It starts in a folder of its own, made for it and removed after: what a command writes where it stands (the
    default ``out/report``, its lock, pytest's cache) is never shared by two tests that xdist runs at once.
    Spark's driver neither maps nor makes a class archive in the user's cache unless ENV says so
    (``sbtck.workloads.sparkling.ClassArchive``; tests/workloads/test_spark.py makes one of its own).
    """
    with tempfile.TemporaryDirectory(prefix="sbtck-kit-") as here:
        return subprocess.run(
            [sys.executable, "-m", "sbtck.cli", *args],
            cwd=here,
            env={**os.environ, "SBTCK_SPARK_CLASSES": "off", "PYTHONPATH": str(ROOT), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def sbtck(*args: str, out: Path, timeout: float = 300) -> Run:
    proc = kit("run", "--out", str(out), *args, timeout=timeout)
    return Run(proc.returncode, proc.stdout + proc.stderr, out)


def assert_machine_fails(machine: type[Any], examples: int = 400) -> None:
    """A state machine run against a deliberately wrong engine must find the fault (no shrinking: speed).

    Derandomized: a fault that only some runs would find makes a test that fails now and then, which says
    nothing; the same examples every time either find it or not, and the count is set so that they do.
    """
    import pytest
    from hypothesis import Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    with pytest.raises(AssertionError):
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=40,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                report_multiple_bugs=False,
                derandomize=True,
            ),
        )


def processes_with(marker: str) -> list[int]:
    """The processes whose command line holds MARKER: an implementation the kit should have ended."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found
