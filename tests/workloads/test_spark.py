"""The stage on real Spark: local[2], a standalone cluster, and the faults a long job meets."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbtck.reports import workload as workload_report
from sbtck.reports.results import ERROR, FAILED, PASSED
from sbtck.workloads import job, sparkling
from sbtck.workloads.generate import generate
from sbtck.workloads.output import INCOMPLETE, SUMMARY, Output
from sbtck.workloads.trace import run as run_world
from tests.fakes import faulty_workers
from tests.helpers import kit
from tests.workloads.spark_cluster import standalone

# one JVM for the module, on one xdist worker: a session costs seconds, two would fight over two cores
pytestmark = pytest.mark.xdist_group("spark")
WRONG = "python:tests.variants.activation:ignores_max_queue_readers"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # local[2] with up to 4 attempts per task: Spark's local mode retries nothing otherwise
    session = sparkling.session("local[2,4]")
    yield session
    session.stop()


def _run(spark: Any, out: Path, **plan: Any) -> dict[str, Any]:
    output = Output(out)
    output.prepare()
    summary = job.run(spark, job.Plan(out=out, **plan), output)
    output.finish(summary)
    return summary


def _rows(spark: Any, folder: Path) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(str(folder)).orderBy("seed").collect()]


def workload(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return kit("workload", *args, timeout=timeout)


def test_a_local_run_checks_every_world_once_and_writes_what_failed(spark: Any, tmp_path: Path) -> None:
    summary = _run(spark, tmp_path, worlds=60, seed=100, iut=WRONG, partitions=3, shrink_limit=2)
    rows = _rows(spark, tmp_path / "worlds")
    assert [r["seed"] for r in rows] == list(range(100, 160))
    failed = [r for r in rows if r["outcome"] == FAILED]
    assert failed and all("ACT-10" in r["rules"] for r in failed)
    assert summary["worlds"] == 60 and summary["failed_worlds"] == len(failed)
    assert summary["conversations"] == sum(r["conversations"] for r in rows)
    assert summary["violations"]["ACT-10"] == len(failed)
    failures = _rows(spark, tmp_path / "failures")
    assert [f["seed"] for f in failures] == [r["seed"] for r in failed]
    first = failures[0]
    assert json.loads(first["script"])[0]["kind"] == "start"
    assert json.loads(first["iut_trace"]) and json.loads(first["reference_trace"])
    assert len(summary["reproducers"]) == 2
    for rep in summary["reproducers"]:
        text = (tmp_path / rep["path"]).read_text()
        assert text.startswith("@workload") and "When " in text
    assert summary["outcomes"] == {FAILED: len(failed), PASSED: 60 - len(failed)}
    # the mix of worlds by what they asked of the implementation, counted from the same rows
    mix = Counter(", ".join(r["capabilities"]) for r in rows)
    assert summary["capabilities"] == dict(mix) and sum(mix.values()) == 60
    assert workload_report.load(tmp_path / SUMMARY)["worlds"] == 60  # what sbtck report --workload reads
    assert not (tmp_path / INCOMPLETE).exists()


def test_the_same_seeds_give_the_same_rows_and_the_hashes_of_an_in_process_run(spark: Any, tmp_path: Path) -> None:
    _run(spark, tmp_path / "a", worlds=40, seed=7, partitions=2)
    _run(spark, tmp_path / "b", worlds=40, seed=7, partitions=5)
    first, second = _rows(spark, tmp_path / "a" / "worlds"), _rows(spark, tmp_path / "b" / "worlds")
    assert first == second
    from sbtck.iut.reference import reference

    assert [r["trace_hash"] for r in first[:10]] == [
        run_world(generate(seed), reference()).digest() for seed in range(7, 17)
    ]
    assert {r["outcome"] for r in first} == {PASSED}


def test_a_worker_that_dies_is_retried_and_no_world_is_counted_twice_or_lost(spark: Any, tmp_path: Path) -> None:
    faulty_workers.DIE_ONCE_MARKER.write_text("die")
    try:
        summary = _run(spark, tmp_path, worlds=30, iut="python:tests.fakes.faulty_workers:dies_once", partitions=2)
    finally:
        faulty_workers.DIE_ONCE_MARKER.unlink(missing_ok=True)
    assert not faulty_workers.DIE_ONCE_MARKER.exists(), "no worker died: the test proves nothing"
    rows = _rows(spark, tmp_path / "worlds")
    assert [r["seed"] for r in rows] == list(range(30))
    assert summary["worlds"] == 30 and {r["outcome"] for r in rows} == {PASSED}


def test_an_implementation_that_crashes_on_one_world_is_an_error_for_that_world_only(
    spark: Any, tmp_path: Path
) -> None:
    serve = f"{sys.executable} -m sbtck.cli serve --stdio --iut python:tests.fakes.faulty_workers:crashes_on_world"
    summary = _run(spark, tmp_path, worlds=12, iut=f"cmd:{serve}", partitions=2)
    rows = _rows(spark, tmp_path / "worlds")
    errors = [r for r in rows if r["outcome"] == ERROR]
    assert [r["seed"] for r in errors] == [faulty_workers.CRASH_SEED]
    assert f"world {faulty_workers.CRASH_SEED}" in errors[0]["detail"]
    assert {r["outcome"] for r in rows if r["seed"] != faulty_workers.CRASH_SEED} == {PASSED}
    assert summary["errors"][0]["seed"] == faulty_workers.CRASH_SEED


def test_a_standalone_cluster_gives_the_same_parquet_as_local(spark: Any, tmp_path: Path) -> None:
    local = _run(spark, tmp_path / "local", worlds=24, seed=500, iut=WRONG, shrink_limit=1)
    with standalone(tmp_path / "cluster") as master:
        done = workload("--master", master, "--worlds", "24", "--seed", "500", "--iut", WRONG, "--shrink-limit", "1",
                        "--out", str(tmp_path / "remote"))  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    for part in ("worlds", "failures"):
        assert _rows(spark, tmp_path / "remote" / part) == _rows(spark, tmp_path / "local" / part)
    progress = [line for line in done.stderr.splitlines() if "worlds (" in line]
    assert "24/24 worlds (100%)" in progress[-1] and f"ACT-10 {local['violations']['ACT-10']}" in progress[-1]
    assert "reproducer for ACT-10" in done.stdout


def test_a_job_that_cannot_finish_leaves_the_folder_marked_incomplete(tmp_path: Path) -> None:
    earlier = Output(tmp_path)  # an earlier, complete result of a job in this folder
    earlier.prepare()
    earlier.finish({"worlds": 1})
    done = workload("--master", "local[2,2]", "--worlds", "4", "--iut", "python:tests.fakes.faulty_workers:always_dies",
                    "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 2
    assert "did not finish" in done.stderr
    # the earlier result is whole again, and the folder says that the latest job did not finish
    assert json.loads((tmp_path / SUMMARY).read_text()) == {"worlds": 1}
    assert "did not finish" in (tmp_path / INCOMPLETE).read_text()
    assert "previous, finished job" in (tmp_path / INCOMPLETE).read_text()
    assert not list(tmp_path.glob(".staging-*")) and not list(tmp_path.glob(".previous-*"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--worlds", "-3"], "a count is 1 or more, got -3"),
        (["--worlds", "many"], "expected a whole number, got 'many'"),
        (["--seed", "-1"], "a seed is 0 or more"),
        (["--master", "sparkle://x"], "is not a Spark master URL"),
        (["--master", "spark://127.0.0.1:1"], "nothing answers at 127.0.0.1:1"),
        (["--iut", "nonsense"], "unknown kind of implementation"),
    ],
)
def test_bad_input_is_refused_before_spark_starts(args: list[str], message: str, tmp_path: Path) -> None:
    done = workload(*args, "--out", str(tmp_path / "out"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out" / SUMMARY).exists()


def test_an_unwritable_output_folder_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = workload("--out", str(blocker / "out"), "--worlds", "1", timeout=60)
    assert done.returncode == 2
    assert "cannot write there" in done.stderr
