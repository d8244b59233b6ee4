"""The workload stage and the kit's processes under hostile input: refusals before Spark, a full disk, faults that
stay in their world, reproducers checked both ways, and processes that end with the kit (issue 47)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sbtck import contract, limits, workload_cli
from sbtck.errors import ContractError, DeclarationError
from sbtck.fixtures.topology import named, parse
from sbtck.iut.loader import factory_for
from sbtck.iut.reference import reference
from sbtck.reports.results import ERROR, FAILED, PASSED
from sbtck.topology import plain
from sbtck.workloads import job, sparkling
from sbtck.workloads.output import INCOMPLETE, SUMMARY
from sbtck.workloads.progress import Progress
from sbtck.workloads.stage import Checker, Outcome
from tests.fakes import stage_faults
from tests.helpers import ROOT, kit


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


def test_reproducers_that_could_not_be_checked_both_ways_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check's runs did not finish in time: the reproducers were written unchecked, though only one that
    passes on the reference and fails on its implementation may be kept."""
    monkeypatch.setattr(job, "scenarios_run", lambda folder, iut: None)
    (tmp_path / "world-4.feature").write_text("Feature: unchecked\n")
    written = [{"rule": "ACT-10", "seed": 4, "path": "reproducers/world-4.feature"}]
    kept, dropped = job.checked_both_ways(tmp_path, written, "python:x")
    assert kept == [] and [(d["seed"], d["rule"]) for d in dropped] == [(4, "ACT-10")]
    assert "not checked both ways" in dropped[0]["why"]
    assert list(tmp_path.iterdir()) == []
    assert "the reproducers were not kept" in capsys.readouterr().out


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


# ------------------------------------------------------------------ processes end with the kit (item 7)

MARKER = "SBTCK_TEST_LINEAGE"
SETTLED = f"cmd:{sys.executable} {ROOT / 'tests' / 'fakes' / 'misbehaving.py'} settled"


def _marked(value: str) -> list[int]:
    """The processes whose environment holds MARKER=VALUE: all a kit started with it in its own has started."""
    mark = f"{MARKER}={value}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def _gone(value: str, within_s: float = 15) -> list[int]:
    deadline = time.monotonic() + within_s
    while _marked(value) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _marked(value)
    for pid in left:  # not left for the next test, whatever this one says
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.xdist_group("spark")
def test_the_workloads_terminal_shows_an_implementations_sequences_as_the_page_does(tmp_path: Path) -> None:
    """An implementation's OSC 52 (the user's clipboard), OSC 0 and U+202E, in a failed world's events and in the
    error of another, reach the terminal as [U+001B]..., from the summary and from sbtck workload show."""
    out = tmp_path / "o"
    iut = "python:tests.fakes.stage_faults:escapes"
    ran = kit("workload", "--worlds", "6", "--master", "local[1]", "--iut", iut, "--out", str(out), "--shrink-limit",
              "0", timeout=600)  # fmt: skip
    assert ran.returncode == 1, ran.stderr[-3000:]
    failed = json.loads((out / SUMMARY).read_text())
    assert failed["errors"] and failed["failed_worlds"], failed
    seed = json.loads((out / "failures.jsonl").read_text().splitlines()[0])["seed"]
    shown = kit("workload", "show", str(out), str(seed), timeout=120)
    assert shown.returncode == 0, shown.stderr
    said = ran.stdout + ran.stderr + shown.stdout + shown.stderr
    assert "[U+001B]]52;c;" in ran.stdout and "[U+001B]]52;c;" in shown.stdout, said[-3000:]
    assert "\x1b" not in said and "\u202e" not in said and "\x07" not in said


def test_a_daemon_an_implementation_starts_with_setsid_ends_with_it(tmp_path: Path) -> None:
    value = uuid.uuid4().hex
    proc = kit("run", "--iut", SETTLED, "--tags", "ACT-09 and not ACT-05", "--out", str(tmp_path / "o"),
               env={MARKER: value}, timeout=300)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert _gone(value, within_s=5) == []


def _sleeping(value: str) -> list[int]:
    """The `sleep 600.N` an escaped daemon of VALUE runs: its environment holds nothing to find it by."""
    argv = ["sleep", f"600.{int(value, 16) % 10**9}"]
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if cmdline.read_bytes().split(b"\0")[:2] == [a.encode() for a in argv]:
                found.append(int(cmdline.parent.name))
    return found


def test_a_daemon_with_an_empty_environment_ends_with_the_run_too(tmp_path: Path) -> None:
    """setsid env -i: the daemon keeps neither the implementation's process group nor its environment, and
    lived on after sbtck run; the run is the subreaper of what it starts, and ends it all."""
    value = uuid.uuid4().hex
    escaped = SETTLED.replace(" settled", " escaped")
    proc = kit("run", "--iut", escaped, "--tags", "ACT-09 and not ACT-05", "--out", str(tmp_path / "o"),
               env={MARKER: value}, timeout=300)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    left = _sleeping(value)
    for pid in left:  # not left for the next test, whatever this one says
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == []


def _taking_signals(pid: int) -> None:
    """Until the process takes SIGTERM (Linux's SigCgt): before, the interpreter is starting, with no line of the
    kit run yet, and a signal ends it as it ends any program (on a loaded machine that is a few tenths of a second)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            caught = next(
                line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:")
            )
            if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
                return
        time.sleep(0.005)
    raise AssertionError("the kit never took SIGTERM")


@pytest.mark.xdist_group("spark")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_at_any_moment_of_a_workloads_first_seconds_ends_it_all(sig: int, tmp_path: Path) -> None:
    """Every 0.2 s of the first 5 from the kit's first line: the kit starting, the JVM starting, the implementation
    and its daemon starting.
    Whatever it cut, the kit exits 2 in its own words, and nothing it started (the JVM, Spark's Python workers, the
    implementation, the daemon that left its session) is left."""
    wrong = []
    for step in range(25):
        value, out = uuid.uuid4().hex, tmp_path / f"out-{step}"
        log = tmp_path / f"log-{step}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[1]", "--worlds", "20", "--iut", SETTLED,
             "--out", str(out)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "SBTCK_SPARK_CLASSES": "off", MARKER: value},
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        _taking_signals(proc.pid)
        time.sleep(step * 0.2)
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
        said = log.read_text()
        left = _gone(value)
        if code != 2 or left or any(w in said for w in ("Traceback", "RuntimeError", "Py4J", "py4j")):
            wrong.append(f"at {step * 0.2:.1f} s: exit {code}, left {left}:\n{said[-1500:]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.xdist_group("spark")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_while_failing_worlds_are_shrunk_ends_it_all_quietly(sig: int, tmp_path: Path) -> None:
    """Past the first seconds too: a signal while the job shrinks its failing worlds printed a traceback of
    PySpark's accumulator server (its executors' updates cut short) before the kit's own line."""
    value, out, log = uuid.uuid4().hex, tmp_path / "out", tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[2]", "--worlds", "300", "--iut",
         "python:tests.variants.activation:ignores_max_queue_readers", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), MARKER: value},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while "shrinking" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, log.read_text()[-2000:]
    proc.send_signal(sig)
    code = proc.wait(timeout=120)
    said = log.read_text()
    assert (code, _gone(value)) == (2, []), said[-2000:]
    assert not any(w in said for w in ("Traceback", "Exception occurred", "Py4J", "py4j")), said[-3000:]
    assert (out / INCOMPLETE).is_file()


# ------------------------------------------------------------------ every size bounded (item 4)


def _copies(n: int) -> str:
    """The periodic topology's three instances N times over, as a topology file says it."""
    out = {}
    for k in range(n):
        for name in ("sql1", "sql2", "sql5"):
            spec: dict[str, Any] = {"address": f"TCP://{name}x{k}.example:4022"}
            if name == "sql5":
                spec["message_forwarding"] = "ON"
            else:
                spec["databases"] = {
                    db: {
                        "broker_instance": str(uuid.uuid4()).upper(),
                        "queues": {queue: {}},
                        "services": {service: {"queue": queue}},
                    }
                    for db, queue, service in (
                        ("shop", "InitiatorQueue", "Initiator"),
                        ("stock", "TargetQueue", "Target"),
                    )
                }
            out[f"{name}x{k}"] = spec
    return yaml.safe_dump({"instances": out}, sort_keys=False)


def _feature(topology: str, seconds: int) -> str:
    return (
        "@PER-0 @requires-periodic-tasks\nFeature: Big\n\n  Scenario: [1] Time passes on a large topology\n"
        '    Given the topology:\n      """\n' + textwrap.indent(topology, "      ") + '      """\n'
        f"    When time passes to second {seconds}\n" + '    Then the log has 1 "broker started" event\n'
    )


def _peak_mib(*args: str, env: dict[str, str] | None = None) -> tuple[int, subprocess.CompletedProcess[str]]:
    """``sbtck ARGS`` run in a child, and the peak memory of its processes, in MiB."""
    measure = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "sbtck.cli", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return int(proc.stderr.strip().splitlines()[-1]) // 1024, proc


@pytest.mark.parametrize(
    ("limit", "setting", "topology"),
    [
        (limits.INSTANCES, "", _copies(11)),
        (limits.QUEUES, "3", (ROOT / "fixtures" / "topologies" / "activation.yaml").read_text()),
        (limits.ROUTES, "2", (ROOT / "fixtures" / "topologies" / "routing.yaml").read_text()),
        (limits.DATABASES, "2", (ROOT / "fixtures" / "topologies" / "periodic.yaml").read_text()),
    ],
    ids=lambda v: v.variable if isinstance(v, limits.Limit) else "",
)
def test_a_topology_beyond_a_limit_is_refused_where_it_is_declared_naming_the_limit(
    limit: limits.Limit, setting: str, topology: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if setting:
        monkeypatch.setenv(limit.variable, setting)
    with pytest.raises(DeclarationError, match=f"the kit's limit is {limit.value} \\({limit.variable}\\)"):
        parse(topology, "big.yaml")


def test_the_reference_refuses_a_topology_beyond_a_limit_and_more_dialogs_than_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = parse(_copies(5), "big").plain  # 15 instances: within the default limits
    monkeypatch.setenv(limits.INSTANCES.variable, "10")
    engine = reference()
    with pytest.raises(ContractError, match="the topology declares 15 instances; the kit's limit is 10"):
        engine.execute(contract.Start(0, big))
    monkeypatch.setenv(limits.DIALOGS.variable, "1")
    engine.execute(contract.Start(0, named("activation").plain))
    dialog = {"instance": "sql1", "database": "shop", "from_service": "Initiator", "to_service": "PlainService"}
    assert engine.execute(contract.BeginDialog(0, dialog="d1", **dialog)).ok
    with pytest.raises(ContractError, match="has begun 1 dialogs; the kit's limit is 1 \\(SBTCK_MAX_DIALOGS\\)"):
        engine.execute(contract.BeginDialog(0, dialog="d2", **dialog))


def test_a_command_causing_more_events_than_the_limit_ends_the_scenario_in_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(limits.EVENTS_PER_COMMAND.variable, "1000")
    engine = reference()
    engine.execute(contract.Start(0, named("periodic").plain))
    with pytest.raises(ContractError, match="one command caused more than 1000 events; the kit's limit is 1000"):
        engine.execute(contract.AdvanceTime(86_400_000))
    assert (
        engine.execute(contract.AdvanceTime(86_400_001)).error == "advance_time before start: declare a topology first"
    )


@pytest.mark.parametrize("copies", [60, 200])
def test_the_issues_large_inline_topologies_are_one_error_each_within_500_mb(copies: int, tmp_path: Path) -> None:
    (tmp_path / "big.feature").write_text(_feature(_copies(copies), 86_400))
    peak, proc = _peak_mib("run", "--features", str(tmp_path / "big.feature"), "--out", str(tmp_path / "o"))
    assert proc.returncode in (1, 2), proc.stderr[-2000:]
    assert "(SBTCK_MAX_INSTANCES)" in proc.stdout + proc.stderr + (tmp_path / "o" / "results.json").read_text()
    assert peak < 500, peak


def test_a_days_advance_of_a_topology_within_the_limits_is_bounded_by_the_events_limit(tmp_path: Path) -> None:
    (tmp_path / "big.feature").write_text(_feature(_copies(10), 86_400))  # 30 instances, a timer each 5 s
    peak, proc = _peak_mib("run", "--features", str(tmp_path / "big.feature"), "--out", str(tmp_path / "o"))
    [scenario] = json.loads((tmp_path / "o" / "results.json").read_text())["scenarios"]
    assert scenario["status"] == ERROR, proc.stdout[-2000:]
    assert "one command caused more than 200000 events" in scenario["failure"]["message"]
    assert "(SBTCK_MAX_EVENTS_PER_COMMAND)" in scenario["failure"]["message"]
    assert peak < 500, peak


def _serve(*request: dict[str, Any], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(r) + "\n" for r in request)
    done = subprocess.run(
        [sys.executable, "-m", "sbtck", "serve", "--stdio"],
        input=lines,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_serve_holds_each_connection_to_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.INSTANCES.variable, "1000")  # here only: the server holds the default
    big = plain(parse(_copies(11), "big").plain)
    monkeypatch.delenv(limits.INSTANCES.variable)
    start: dict[str, Any] = {"id": 1, "op": "execute", "command": {"kind": "start", "at_ms": 0, "topology": big}}
    [answer] = _serve(start)
    assert answer["ok"] is False and "(SBTCK_MAX_INSTANCES)" in answer["error"], answer
    periodic = {**start, "command": {**start["command"], "topology": plain(named("periodic").plain)}}
    day = {"id": 2, "op": "execute", "command": {"kind": "advance_time", "at_ms": 86_400_000}}
    answers = _serve(periodic, day, env={limits.EVENTS_PER_COMMAND.variable: "500"})
    assert answers[0]["ok"] is True
    assert answers[1]["ok"] is False and "(SBTCK_MAX_EVENTS_PER_COMMAND)" in answers[1]["error"], answers[1]


def test_twenty_clients_with_large_topologies_keep_serve_within_500_mb(tmp_path: Path) -> None:
    """The issue's case: 20 clients over TCP, each starting a large topology and letting hours pass, took the
    server to 946 MB that stayed after they left. At most SBTCK_SERVE_MAX_CONNECTIONS are served at once, each
    held to the size limits and its events per command."""
    topology = plain(parse(_copies(10), "big").plain)  # 30 instances, within SBTCK_MAX_INSTANCES
    requests = [
        {"id": 1, "op": "hello", "protocol": contract.PROTOCOL_VERSION},
        {"id": 2, "op": "execute", "command": {"kind": "start", "at_ms": 0, "topology": topology}},
        *({"id": 3 + h, "op": "execute", "command": {"kind": "advance_time", "at_ms": (h + 1) * 900_000}}
          for h in range(4)),
    ]  # fmt: skip
    lines = "".join(json.dumps(r) + "\n" for r in requests).encode()
    server = subprocess.Popen(
        [sys.executable, "-m", "sbtck", "serve", "--tcp", "127.0.0.1:0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    served: list[bool] = []

    def client() -> None:
        for _ in range(600):
            with socket.create_connection(("127.0.0.1", port), timeout=120) as conn:
                conn.sendall(lines)
                answers = conn.makefile("rb")
                first = answers.readline()
                if b"SBTCK_SERVE_MAX_CONNECTIONS" in first:
                    time.sleep(0.2)
                    continue
                got = [json.loads(first), *(json.loads(answers.readline()) for _ in requests[1:])]
                served.append(all(a["ok"] for a in got))
                return

    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        clients = [threading.Thread(target=client) for _ in range(20)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=300)
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{server.pid}/status").read_text().splitlines() if ":" in line
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert served == [True] * 20, served
    peak_mib = int(status["VmHWM"].split()[0]) // 1024
    assert peak_mib < 500, f"sbtck serve peaked at {peak_mib} MiB"


def test_serve_tcp_serves_at_most_its_limit_of_connections_at_once() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "sbtck", "serve", "--tcp", "127.0.0.1:0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), limits.CONNECTIONS.variable: "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as first:
            first.sendall(b'{"id": 1, "op": "hello", "protocol": "2.1"}\n')
            assert json.loads(first.makefile().readline())["ok"] is True
            with socket.create_connection(("127.0.0.1", port), timeout=10) as second:
                refused = json.loads(second.makefile().readline())
            assert refused["ok"] is False
            assert "the kit's limit is 1 (SBTCK_SERVE_MAX_CONNECTIONS)" in refused["error"]
        # the first gone, the next is served
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
                third.sendall(b'{"id": 1, "op": "hello", "protocol": "2.1"}\n')
                if json.loads(third.makefile().readline())["ok"]:
                    break
            time.sleep(0.2)
        else:
            raise AssertionError("no connection was served after the first left")
    finally:
        server.terminate()
        server.wait(timeout=10)
