"""The workload stage and the kit's processes under hostile input: refusals before Spark, a full disk, faults that
stay in their world, reproducers checked both ways, and processes that end with the kit (issue 47)."""

from __future__ import annotations

import argparse
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from sbtck import workload_cli
from sbtck.workloads import job, sparkling
from sbtck.workloads.output import INCOMPLETE, SUMMARY
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
