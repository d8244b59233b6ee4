"""The stage on real Spark: local[2], a standalone cluster, and the faults a long job meets."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbtck.iut.loader import factory_for
from sbtck.reports import workload as workload_report
from sbtck.reports.results import ERROR, FAILED, PASSED
from sbtck.workloads import job, record, sparkling
from sbtck.workloads.generate import PERIODIC_VIEW, generate
from sbtck.workloads.output import INCOMPLETE, SUMMARY, Output
from sbtck.workloads.trace import run as run_world
from tests.fakes import faulty_workers
from tests.helpers import ROOT, kit, processes_with
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


def workload(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return kit("workload", *args, timeout=timeout, env=env)


def test_a_local_run_checks_every_world_once_and_writes_what_failed(spark: Any, tmp_path: Path) -> None:
    summary = _run(spark, tmp_path, worlds=60, seed=100, iut=WRONG, partitions=3, shrink_limit=2)
    rows = _rows(spark, tmp_path / "worlds")
    assert [r["seed"] for r in rows] == list(range(100, 160))
    failed = [r for r in rows if r["outcome"] == FAILED]
    assert failed and all("ACT-10" in r["rules"] for r in failed)
    assert summary["worlds"] == 60 and summary["failed_worlds"] == len(failed)
    # what the implementation declared, decision_trace among them, which no world asks for (cr13's G10)
    assert "decision_trace" in summary["declared"] and "decision_trace" not in str(summary["capabilities"])
    assert summary["conversations"] == sum(r["conversations"] for r in rows)
    assert summary["violations"]["ACT-10"] == len(failed)
    failures = _rows(spark, tmp_path / "failures")
    assert [f["seed"] for f in failures] == [r["seed"] for r in failed]
    first = failures[0]
    assert json.loads(first["script"])[0]["kind"] == "start"
    assert json.loads(first["iut_trace"]) and json.loads(first["reference_trace"])
    # each readable without Spark: a record a line, in the order of the seeds, and the page
    records = list(record.read(tmp_path))
    assert [r["seed"] for r in records] == [f["seed"] for f in failures]
    for rec in records:  # the step where the sides part shows what differs: a field, or an event on one side only
        shown = [*rec["implementation"]["events"], *rec["reference"]["events"]]
        assert rec["rule"] in rec["rules"] and rec["command"] and any(e["differs"] != [] for e in shown), rec
    assert f'id="seed-{records[0]["seed"]}"' in (tmp_path / record.PAGE).read_text()
    parquet = pytest.importorskip("pyarrow.parquet")  # the parquet extra: the tables without Spark
    assert parquet.read_table(tmp_path / "failures").column("seed").to_pylist() == [f["seed"] for f in failures]
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


def test_the_areas_asked_for_are_drawn_by_turns_and_named_in_the_summary(spark: Any, tmp_path: Path) -> None:
    asked = ("periodic_tasks", "activation")
    summary = _run(spark, tmp_path, worlds=6, areas=asked, partitions=1)
    rows = _rows(spark, tmp_path / "worlds")
    assert summary["areas"] == list(asked) and {r["outcome"] for r in rows} == {PASSED}
    from sbtck.iut.reference import reference

    worlds = [generate(seed, areas=asked) for seed in range(6)]
    assert [r["trace_hash"] for r in rows] == [run_world(w, reference()).digest() for w in worlds]
    # every other world is one of the periodic tasks, which ends by asking for their state
    assert [w.script[-1].get("view") == PERIODIC_VIEW for w in worlds] == [True, False] * 3


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


def test_a_local_master_tries_a_task_again_unless_it_names_its_own_retries() -> None:
    assert [sparkling.with_retries(m) for m in ("local", "local[2]", "local[*]", "local[2,2]", "yarn")] == [
        "local[1,4]",
        "local[2,4]",
        "local[*,4]",
        "local[2,2]",
        "yarn",
    ]


def test_a_job_that_cannot_finish_leaves_the_folder_marked_incomplete(tmp_path: Path) -> None:
    earlier = Output(tmp_path)  # an earlier, complete result of a job in this folder
    earlier.prepare()
    earlier.finish({"worlds": 1})
    done = workload("--master", "local[2]", "--worlds", "4", "--iut", "python:tests.fakes.faulty_workers:always_dies",
                    "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 2
    assert "did not finish" in done.stderr
    # tried LOCAL_ATTEMPTS times, as on a cluster, then named: which worlds, and how to run them alone
    assert re.search(r"the task of the 2 worlds from seed [02] failed 4 times", done.stderr), done.stderr[-2000:]
    assert "--worlds 2 --master local[1]" in done.stderr
    assert re.search(r"the task of the 2 worlds from seed [02]", (tmp_path / INCOMPLETE).read_text())
    # the earlier result is whole again, and the folder says that the latest job did not finish
    assert json.loads((tmp_path / SUMMARY).read_text()) == {"worlds": 1}
    assert "did not finish" in (tmp_path / INCOMPLETE).read_text()
    assert "previous, finished job" in (tmp_path / INCOMPLETE).read_text()
    assert not list(tmp_path.glob(".staging-*")) and not list(tmp_path.glob(".previous-*"))


def test_sigterm_ends_a_job_as_ctrl_c_does_and_the_folder_says_so(tmp_path: Path) -> None:
    """What timeout and CI runners send: INCOMPLETE says the job was interrupted, and no staging is left.

    Its output goes to a file, and the test waits for the kit's own process: a JVM still starting when the
    signal comes may outlive it for a moment, holding a pipe."""
    log = tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[1]", "--worlds", "1000000",
         "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SBTCK_SPARK_CLASSES": "off"},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not list((tmp_path / "out").glob(".staging-*")) and time.monotonic() < deadline:
        time.sleep(0.5)  # until the job has begun writing
    time.sleep(20)  # Spark has started by now on a quiet machine; the signal is taken as well while it starts
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=180)
    output = log.read_text()
    assert proc.returncode == 2, output[-2000:]
    assert "did not finish (signal SIGTERM)" in output
    assert "the workload job did not finish: signal SIGTERM" in (tmp_path / "out" / INCOMPLETE).read_text()
    assert not list((tmp_path / "out").glob(".staging-*"))


def test_ctrl_c_while_an_implementation_hangs_leaves_none_of_it_running(tmp_path: Path) -> None:
    """Spark kills the Python worker that ran the implementation as the job is cancelled, with no clean-up of
    its own: the implementation goes with its parent (sbtck/iut/remote.py, the parent-death signal)."""
    marker, ready = f"stage-hang-{os.getpid()}", tmp_path / "hanging"
    fake = ROOT / "tests" / "fakes" / "misbehaving.py"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[1]", "--worlds", "2",
         "--iut", f"cmd:{sys.executable} {fake} hang {marker}", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SBTCK_SPARK_CLASSES": "off", "SBTCK_REQUEST_TIMEOUT": "600",
             "SBTCK_FAKE_HANGING": str(ready)},
        stdout=(tmp_path / "log").open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ready.exists(), (tmp_path / "log").read_text()[-2000:]
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=180)
    assert "interrupted" in (tmp_path / "out" / INCOMPLETE).read_text()
    deadline = time.monotonic() + 30
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_with(marker) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--worlds", "-3"], "--worlds is from 1 to 1,000,000,000, got -3"),
        (
            ["--worlds", "1" + "0" * 30],
            "--worlds is from 1 to 1,000,000,000, got 1,000,000,000,000,000,000,000,000,000,000",
        ),
        (["--worlds", "9" * 5000], "expected a whole number, got '9999"),
        (["--worlds", "many"], "expected a whole number, got 'many'"),
        (["--seed", "-1"], "--seed is from 0 to"),
        (["--seed", str(2**63 - 1)], "--seed is from 0 to"),
        (["--conversations", "10000000"], "--conversations is from 1 to 100,000, got 10,000,000"),
        (["--partitions", "0"], "--partitions is from 1 to 100,000"),
        (["--shrink-limit", "-1"], "--shrink-limit is from 0 to 10,000, got -1"),
        (["--master", "sparkle://x"], "is not a Spark master URL"),
        (["--master", "spark://127.0.0.1:1"], "nothing answers at 127.0.0.1:1"),
        (["--master", "local[0]"], "local[N] (N at least 1)"),
        (["--iut", "python:os:getcwd"], "the factory returned str, not an implementation"),
        (["--iut", "python:json:loads"], "the factory failed: TypeError"),
        (["--iut", "nonsense"], "unknown kind of implementation"),
        (["--areas", "routing,scheduling"], "expected areas among routing, activation, periodic_tasks"),
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


# ------------------------------------------------------------------ the driver's classes, kept between runs


def test_the_first_run_keeps_the_drivers_classes_and_the_next_maps_them(tmp_path: Path) -> None:
    cache = {sparkling.CACHE_SETTING: str(tmp_path / "cache"), sparkling.CLASSES_SETTING: ""}
    first = workload("--master", "local[1]", "--worlds", "2", "--out", str(tmp_path / "a"), env=cache)
    assert first.returncode == 0, first.stderr[-2000:]
    kept = list((tmp_path / "cache" / "spark-classes").glob("driver-*.jsa"))
    assert len(kept) == 1 and f"kept in {kept[0]}" in first.stdout
    assert not list(kept[0].parent.glob("*.making"))
    made = kept[0].stat().st_mtime_ns
    # -Xshare:on: a JVM that cannot map the archive refuses to start, so a run that finishes mapped it
    second = workload("--master", "local[1]", "--worlds", "2", "--out", str(tmp_path / "b"),
                      env={**cache, "JDK_JAVA_OPTIONS": "-Xshare:on"})  # fmt: skip
    assert second.returncode == 0, second.stderr[-2000:]
    assert "keeping" not in second.stdout and kept[0].stat().st_mtime_ns == made
    assert json.loads((tmp_path / "b" / SUMMARY).read_text())["worlds"] == 2
    kept[0].unlink()  # 170 MB: pytest keeps the folders of its last runs


def test_a_class_archive_a_jvm_cannot_map_is_no_harm(tmp_path: Path) -> None:
    cache = {sparkling.CACHE_SETTING: str(tmp_path / "cache"), sparkling.CLASSES_SETTING: ""}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in cache.items():
            patch.setenv(key, value)
        archive = sparkling.class_archive()
    assert archive is not None and archive.making is not None
    archive.release()
    archive.path.write_bytes(b"not an archive")
    done = workload("--master", "local[1]", "--worlds", "2", "--out", str(tmp_path / "a"), env=cache)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "a" / SUMMARY).read_text())["worlds"] == 2
    assert "shared archive" not in done.stderr.lower() and "[cds" not in done.stderr  # the JVM kept quiet about it


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(sparkling.CACHE_SETTING, str(tmp_path / "cache"))
    monkeypatch.delenv(sparkling.CLASSES_SETTING, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    return tmp_path / "cache" / "spark-classes"


def test_a_class_archive_is_made_by_one_run_at_a_time_and_then_mapped(cache: Path) -> None:
    making = sparkling.class_archive()
    assert making is not None and making.making is not None and making.making.parent == cache
    assert f"-XX:ArchiveClassesAtExit={making.making}" in making.java_options()
    assert sparkling.class_archive() is None  # another run is making it: this one runs without
    making.making.write_bytes(b"written by the JVM as it exits")
    making.release()
    assert not making.making.exists()
    again = sparkling.class_archive()  # the lock is free again: the next run makes it
    assert again is not None and again.making is not None
    again.making.write_bytes(b"archive")
    os.replace(again.making, again.path)
    again.release()
    mapped = sparkling.class_archive()
    assert mapped is not None and mapped.making is None and mapped.path == again.path
    assert f"-XX:SharedArchiveFile={mapped.path}" in mapped.java_options()
    assert not mapped.keep()  # nothing to keep for a run that mapped it


def test_a_run_that_ended_before_its_jvm_leaves_nothing_behind_the_next_maker(cache: Path) -> None:
    first = sparkling.class_archive()
    assert first is not None and first.making is not None
    first.release()
    # a run that ended first: its JVM wrote the archive after it, into that run's own file
    stale = first.making.with_name(first.path.stem + ".99999999.making")
    stale.write_bytes(b"half an archive")
    second = sparkling.class_archive()
    assert second is not None and second.making is not None and not second.path.exists()
    assert not stale.exists()
    second.release()


def test_an_archive_belongs_to_its_jvm_pyspark_and_options(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = sparkling.class_archive()
    assert one is not None
    one.release()
    other = sparkling.class_archive(sparkling.JAVA_OPTIONS + " -Xmx2g")
    assert other is not None and other.path != one.path
    other.release()
    again = sparkling.class_archive()
    assert again is not None and again.path == one.path
    again.release()
    monkeypatch.setenv("JAVA_HOME", str(cache / "no-jdk-here"))
    assert sparkling.class_archive() is None  # no java where spark-class would look: nothing to map or make


@pytest.mark.parametrize("setting", ["off", "OFF", "0", "no", "false"])
def test_the_class_archive_can_be_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(sparkling.CLASSES_SETTING, setting)
    assert sparkling.class_archive() is None
    assert not cache.exists()


def test_no_class_archive_for_a_jvm_this_process_does_not_start(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")  # run by spark-submit: its JVM is already running
    assert sparkling.class_archive() is None


def test_an_unwritable_cache_folder_means_no_class_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(sparkling.CACHE_SETTING, str(blocker / "cache"))
    monkeypatch.delenv(sparkling.CLASSES_SETTING, raising=False)
    assert sparkling.class_archive() is None


def test_a_worker_that_dies_while_one_world_is_shrunk_costs_that_worlds_reproducer_only(
    spark: Any, tmp_path: Path
) -> None:
    from sbtck.workloads.stage import Checker
    from tests.fakes import stage_faults

    checker = Checker(factory_for(WRONG), differential=True)
    try:
        failing = [o.seed for o in map(checker.check, range(40)) if o.outcome == FAILED][:2]
    finally:
        checker.close()
    assert len(failing) == 2
    stage_faults.DYING_SEED_FILE.write_text(str(failing[0]))
    try:
        summary = _run(spark, tmp_path, worlds=failing[1] + 1, iut="python:tests.fakes.stage_faults:dies_when_shrunk",
                       shrink_limit=2)  # fmt: skip
    finally:
        stage_faults.DYING_SEED_FILE.unlink()
    assert [r["seed"] for r in summary["reproducers"]] == [failing[1]]
    [lost] = summary["unreproduced"]
    assert lost["seed"] == failing[0] and "failed every attempt" in lost["why"], lost
    assert summary["failed_worlds"] >= 2  # every world's row is kept
