"""The workload stage and the kit's processes under hostile input: refusals before Spark, a full disk, faults that
stay in their world, reproducers checked both ways, and processes that end with the kit (issue 47)."""

from __future__ import annotations

import argparse
import errno
import io
import os
import time
from pathlib import Path
from typing import Any

import pytest

from sbtck import workload_cli
from sbtck.iut.loader import factory_for
from sbtck.reports.results import ERROR, FAILED, PASSED
from sbtck.workloads import job, sparkling
from sbtck.workloads.output import INCOMPLETE, SUMMARY
from sbtck.workloads.progress import Progress
from sbtck.workloads.stage import Checker, Outcome
from tests.fakes import stage_faults
from tests.helpers import kit


def _workload_args(out: Path, **given: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    workload_cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["workload", "--out", str(out), *[f"--{k}={v}" for k, v in given.items()]])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--iut", "cmd:/nonexistent/prog --fast"], "cannot start '/nonexistent/prog': no such program on PATH"),
        (["--master", "local[99999999]"], "threads on this machine"),
        (["--master", "local[99999999,4]"], "threads on this machine"),
    ],
)
def test_a_job_that_cannot_run_is_refused_in_one_line_before_spark(args: list[str], said: str, tmp_path: Path) -> None:
    done = kit("workload", *args, "--out", str(tmp_path / "out"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Spark" not in done.stdout  # refused before the job was announced, and so before Spark started
    assert not (tmp_path / "out").exists()


class _Session:
    """What workload_cli needs of a SparkSession when the job itself is replaced."""

    class sparkContext:  # SparkSession's own name
        defaultParallelism = 2

    def stop(self) -> None:
        pass


# Spark's account of a full disk, as the JVM's IOException reaches Python inside a Py4J error
_JAVA_FULL_DISK = (
    "An error occurred while calling o57.parquet.\n: org.apache.spark.SparkException: Job aborted.\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.jobAbortedError(QueryExecutionErrors.scala:651)\n"
    "Caused by: java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream.writeBytes"
)


@pytest.mark.parametrize("where", ["in spark", "in the summary"])
def test_a_full_disk_says_no_space_in_one_line(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sparkling, "session", lambda *a, **k: _Session())
    monkeypatch.setattr(sparkling, "class_archive", lambda: None)

    def full(*_: Any) -> dict[str, Any]:
        if where == "in spark":
            raise RuntimeError(_JAVA_FULL_DISK)
        return {"failed_worlds": 0, "outcomes": {"passed": 1}}

    def no_room(self: Any, summary: dict[str, Any]) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(job, "run", full)
    monkeypatch.setattr("sbtck.workloads.output.Output.finish", no_room)
    code = workload_cli.run(_workload_args(tmp_path / "out"))
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"sbtck workload: the job did not finish: no space left on the device of {tmp_path / 'out'}; free some or "
        "name another --out"
    ]
    assert "no space left" in (tmp_path / "out" / INCOMPLETE).read_text()
    assert not (tmp_path / "out" / SUMMARY).exists()


# ------------------------------------------------------------------ faults stay in their world (item 6)

WRONG = "python:tests.variants.activation:ignores_max_queue_readers"


@pytest.fixture(scope="module")
def failing() -> Outcome:
    """A world the wrong broker fails, as the job hands it to the shrinker."""
    checker = Checker(factory_for(WRONG), differential=True)
    try:
        found = next(o for o in map(checker.check, range(40)) if o.outcome == FAILED)
    finally:
        checker.close()
    return found


def test_answers_that_break_the_check_are_that_worlds_error() -> None:
    checker = Checker(stage_faults.odd_rows, differential=True)
    outcomes = [checker.check(seed) for seed in range(3)]
    assert {o.outcome for o in outcomes} == {ERROR}
    assert all("its check failed: TypeError" in o.detail for o in outcomes), outcomes[0].detail


def test_a_fault_while_shrinking_is_that_worlds_record_not_the_tasks(
    failing: Outcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage_faults, "SHRUNK_AFTER", 0)
    stage_faults.restart()
    plan = job.Plan(1, iut="python:tests.fakes.stage_faults:faults_when_shrunk")
    record = job.shrunk(plan, failing)
    assert record["seed"] == failing.seed and record["rule"] == failing.rules[0]
    assert "text" not in record
    assert "the broker fell over on a rerun" in record["why"], record


def test_shrinking_stops_at_its_time_budget_and_tells_every_run(
    failing: Outcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage_faults, "SHRUNK_AFTER", 0)
    monkeypatch.setattr(stage_faults, "SLOW_S", 0.5)
    monkeypatch.setenv(job.SHRINK_BUDGET_SETTING, "2")
    stage_faults.restart()
    runs: list[int] = []
    plan = job.Plan(1, iut="python:tests.fakes.stage_faults:slow_when_shrunk")
    record = job.shrunk(plan, failing, tried=lambda: runs.append(1))
    assert "stopped by its time budget" in record["text"], record
    # every run but the ones the budget cut short was told; a whole shrink of this world takes hundreds
    assert 1 <= len(runs) < 40
    assert f"@{failing.rules[0]}" in record["text"].splitlines()[0]


def test_the_driver_counts_the_runs_its_executors_tell() -> None:
    tries = job.Tries()
    try:
        tell = job._teller(tries.port)
        for _ in range(3):
            tell()
        deadline = time.monotonic() + 10
        while tries.count < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tries.count == 3
    finally:
        tries.close()


def test_the_progress_line_can_say_what_is_being_done() -> None:
    stream = io.StringIO()
    with Progress(lambda: (0, {}, 0), 2, stream=stream, every_s=0.01, text=lambda: "shrinking 2 failing worlds"):
        pass
    assert stream.getvalue().splitlines()[-1] == "shrinking 2 failing worlds"


# ------------------------------------------------------------------ reproducers checked both ways (item 8)


def test_a_reproducer_is_kept_only_if_it_passes_on_the_reference_and_fails_on_its_implementation(
    failing: Outcome, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checker = Checker(factory_for(WRONG), differential=True)
    try:
        text, _ = checker.reproduce(failing)
    finally:
        checker.close()
    (tmp_path / "world-1.feature").write_text(text)
    # passes on the reference and on the wrong broker alike: it shows nothing of what the broker does wrong
    (tmp_path / "world-2.feature").write_text(
        'Feature: shows nothing\n  Scenario: shows nothing\n    Given the topology "activation"\n'
        '    Then the log has 1 "broker started" event\n'
    )
    written = [{"rule": failing.rules[0], "seed": seed, "path": f"reproducers/world-{seed}.feature"} for seed in (1, 2)]
    kept, dropped = job.checked_both_ways(tmp_path, written, WRONG)
    assert [entry["seed"] for entry in kept] == [1]
    assert [(entry["seed"], entry["rule"]) for entry in dropped] == [(2, failing.rules[0])]
    assert f"its scenario is passed on {WRONG}, so it does not reproduce the failure" in dropped[0]["why"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["world-1.feature"]
    assert "dropped the reproducer of seed 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("got", "why"),
    [
        ({"status": ERROR, "failure": {"message": "gave no answer"}}, "its scenario is error on"),
        (
            {"status": FAILED, "failure": {"message": "the workload stage's checks fail:\n  RTE-04 at command 3 (x)"}},
            "fails on python:x for RTE-04, not for ACT-10",
        ),
        (None, "its scenario is not run on"),
    ],
)
def test_a_reproducer_failing_otherwise_or_not_at_all_is_not_the_worlds(got: dict[str, Any] | None, why: str) -> None:
    said = job._not_reproducing("ACT-10", {"status": PASSED}, got, "python:x")
    assert said is not None and why in said
    stated = {"status": FAILED, "failure": {"message": "the workload stage's checks fail:\n  ACT-10 at the end: y"}}
    assert job._not_reproducing("ACT-10", {"status": PASSED}, stated, "python:x") is None
    assert job._not_reproducing("ACT-10", {"status": PASSED}, {"status": FAILED, "failure": {}}, "python:x") is None
