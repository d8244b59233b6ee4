"""The project's tests share nothing: no output folder, lock or port of one is another's (issue 46, F20).

Under ``-n 2`` two tests run at once; a command a test starts without ``--out`` once wrote the default
``out/report`` of the checkout, and two such tests took its lock from each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ORDER
from tests.helpers import ROOT, kit


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")} if folder.exists() else {}


def test_a_command_a_test_starts_writes_nothing_into_the_checkout() -> None:
    before = _snapshot(ROOT / "out")
    proc = kit("run", "--tags", "ACT-02")  # no --out: the default out/report of where it stands
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _snapshot(ROOT / "out") == before


def test_the_tests_that_start_runs_without_out_pass_together_in_any_order() -> None:
    """Two shuffled orders on two workers: each pair of the selection meets at once in some order."""
    for order in ("random:1", "random:2"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-n",
                "2",
                "-p",
                "no:cacheprovider",
                "tests/plugging/test_hostile.py",
                "-k",
                "bad_run_input",
            ],
            cwd=ROOT,
            env={**os.environ, ORDER: order, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, f"{order}:\n{proc.stdout[-3000:]}"


def test_tests_of_one_xdist_group_run_on_one_worker() -> None:
    """scripts/test.sh's ``--dist loadgroup``: the Spark tests share one session, test_shrink its reproducers."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            "tests/workloads/test_shrink.py",
            "-k",
            "ddmin or drops_the_rest",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    ran = [line.split()[0] for line in proc.stdout.splitlines() if " PASSED " in line]
    assert len(ran) == 3 and len(set(ran)) == 1, proc.stdout[-3000:]
    assert proc.stdout.count("@shrink") >= 3, proc.stdout[-3000:]
