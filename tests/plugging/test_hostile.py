"""Hostile input and broken implementations: each case ends in one line of error or a scenario error.

Never a traceback, a hang, lost output or a deleted file of the user's. The
corpus below is every case reported against the kit; tests/contract/test_fuzz.py
adds random and malformed input.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import pytest
import yaml

from sbtck.contract import PROTOCOL_VERSION
from sbtck.engine.params import PROFILE_PATH
from sbtck.errors import DeclarationError, OutputError
from sbtck.iut.profile import load_expectations, load_file
from sbtck.reports import results
from tests.helpers import ROOT, kit, processes_with, sbtck

FAKE = ROOT / "tests" / "fakes" / "misbehaving.py"
SENDING = "ACT-09"  # scenarios that send, so that the fakes misbehave


def _fake(mode: str) -> str:
    return f"cmd:{sys.executable} {FAKE} {mode}"


def _one_line(text: str) -> None:
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]


# ---------------------------------------------------------------- processes


def test_a_grandchild_holding_stdout_does_not_hold_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBTCK_REQUEST_TIMEOUT", "2")
    began = time.monotonic()
    run = sbtck("--iut", _fake("grandchild"), "--tags", SENDING, out=tmp_path, timeout=120)
    took = time.monotonic() - began
    errors = [s for s in run.results()["scenarios"] if s["status"] == results.ERROR]
    assert errors and run.code == 1
    # the implementation's exit is noticed at once, not after the request's time-out, and its status said
    assert all("exited with status 0 while answering send" in s["failure"]["message"] for s in errors)
    assert took < 10 + 1.5 * len(errors), took
    time.sleep(0.5)
    assert processes_with("sleep\x0090") == [], "the grandchild outlived its implementation"


def test_a_daemonised_grandchild_cannot_hang_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "daemon.pid"
    monkeypatch.setenv("SBTCK_REQUEST_TIMEOUT", "2")
    monkeypatch.setenv("SBTCK_FAKE_PIDFILE", str(pidfile))
    began = time.monotonic()
    try:
        run = sbtck("--iut", _fake("daemon"), "--tags", "ACT-09 and not ACT-05", out=tmp_path / "o", timeout=120)
        assert run.code == 1, run.output[-2000:]
        assert time.monotonic() - began < 60
    finally:
        for line in pidfile.read_text().split() if pidfile.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line), signal.SIGKILL)


def test_an_endless_line_is_an_error_naming_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBTCK_MAX_LINE_BYTES", "1000000")
    run = sbtck("--iut", _fake("endless"), "--tags", "ACT-02 or ACT-09", out=tmp_path, timeout=120)
    errors = [s for s in run.results()["scenarios"] if s["status"] == results.ERROR]
    assert errors and all("longer than 1000000 bytes" in s["failure"]["message"] for s in errors)
    assert any(s["status"] == results.PASSED for s in run.results()["scenarios"])


def _peak_kib(run_args: list[str], **env: str) -> int:
    """The peak memory of ``sbtck run RUN_ARGS`` (and of the implementation it starts), in KiB."""
    measure = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "sbtck.cli", "run", *run_args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return int(proc.stdout.strip().splitlines()[-1])


def _ctrl_c_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_until(mode: str, marker: str, out: Path, ready: Path, timeout_s: str) -> subprocess.Popen[str]:
    """``sbtck run`` on the fake MODE, returned once the fake says (by making READY) that it is where the test
    wants it, however loaded the machine; killed, and the test failed, if it never gets there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbtck.cli", "run", "--iut", f"{_fake(mode)} {marker}", "--out", str(out)],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SBTCK_REQUEST_TIMEOUT": timeout_s,
            "SBTCK_FAKE_HANGING": str(ready),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # a shell without job control starts background commands with Ctrl-C ignored, and the child would inherit
        # that: the run is a user's foreground command, where Ctrl-C interrupts
        preexec_fn=_ctrl_c_interrupts,
    )
    deadline = time.monotonic() + 120
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not ready.exists():
        proc.kill()
    assert ready.exists(), f"the fake {mode!r} never got where the test waits for it"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_ends_the_run_and_its_implementation_and_keeps_the_last_report(sig: int, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert sbtck(out=out, timeout=120).code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    marker = f"hang-{os.getpid()}"
    # into a scenario that sends: the fake hangs there
    proc = _run_until("hang", marker, out, tmp_path / "hanging", "120")
    assert processes_with(marker)
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2, output[-2000:]
    assert "interrupted" in output and "left as it was" in output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    partial = json.loads((tmp_path / "report.interrupted" / "results.json").read_text())
    assert partial["interrupted"] is True
    assert 'data-verdict="interrupted"' in (tmp_path / "report.interrupted" / "index.html").read_text()
    time.sleep(1.5)
    assert processes_with(marker) == []


def test_a_flood_on_stderr_is_kept_to_its_tail(tmp_path: Path) -> None:
    """300 MB of stderr: the kit keeps the last SBTCK_STDERR_TAIL_BYTES, in memory, and shows the last lines."""
    peak_kib = _peak_kib(["--iut", _fake("stderr_flood"), "--tags", "ACT-04", "--out", str(tmp_path / "o")])
    assert peak_kib < 300 * 1024, f"the kit (or its implementation) reached {peak_kib} KiB"
    scenarios = json.loads((tmp_path / "o" / "results.json").read_text())["scenarios"]
    errors = [s["failure"]["message"] for s in scenarios if s["status"] == results.ERROR]
    assert errors and all(m.endswith("the last words of the flood") and "exited with status 4" in m for m in errors)
    assert all(len(m) < 16 * 1024 for m in errors)  # fifteen lines, each cut to a thousand characters


def test_an_event_flood_is_bounded_per_answer_per_scenario_and_in_the_report(tmp_path: Path) -> None:
    """100,000 more events on every SEND, within the line limit: past SBTCK_MAX_EVENTS_PER_SCENARIO the scenario is
    an error, the report keeps SBTCK_REPORT_EVENTS of each, and the kit lets go of each scenario's events."""
    peak_kib = _peak_kib(
        ["--iut", _fake("flood"), "--tags", "ACT-09", "--out", str(tmp_path / "o")],
        SBTCK_MAX_EVENTS_PER_SCENARIO="150000",
    )
    assert peak_kib < 600 * 1024, f"the kit reached {peak_kib} KiB"
    written = tmp_path / "o" / "results.json"
    scenarios = json.loads(written.read_text())["scenarios"]
    errors = [s["failure"]["message"] for s in scenarios if s["status"] == results.ERROR]
    assert errors and all("more than 150000 (SBTCK_MAX_EVENTS_PER_SCENARIO)" in m for m in errors)
    assert all(len(s["events"]) <= 2000 for s in scenarios)
    assert any(s["events_not_kept"] > 0 for s in scenarios)
    assert written.stat().st_size < 10 * 2**20
    assert "not kept (SBTCK_REPORT_EVENTS)" in (tmp_path / "o" / "index.html").read_text()


def test_an_implementation_that_stops_reading_its_input_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """Requests fill the pipe it never reads: each write has the request's deadline, then it is started afresh."""
    marker = f"deaf-{os.getpid()}"
    started = time.monotonic()
    proc = kit(
        "run",
        "--iut",
        f"{_fake('deaf')} {marker}",
        "--tags",
        "requires-routing",
        "--out",
        str(tmp_path / "o"),
        timeout=240,
        env={"SBTCK_REQUEST_TIMEOUT": "2"},
    )
    _one_line(proc.stdout + proc.stderr)
    assert proc.returncode == 1 and time.monotonic() - started < 200
    scenarios = json.loads((tmp_path / "o" / "results.json").read_text())["scenarios"]
    stopped = [s["failure"]["message"] for s in scenarios if s["status"] == results.ERROR]
    stopped = [m for m in stopped if "stopped reading its input" in m]
    assert stopped and all(re.search(r"\(\d+ bytes\) could not be written within 2 seconds", m) for m in stopped)
    time.sleep(1.5)
    assert processes_with(marker) == []


def test_ctrl_c_while_the_implementation_stops_reading_ends_everything(tmp_path: Path) -> None:
    """The partial report is written and the goodbye, which cannot be written either, does not hang the close."""
    marker = f"deaf-{os.getpid()}-c"
    # until the kit's requests fill the pipe the fake does not read
    proc = _run_until("deaf", marker, tmp_path / "o", tmp_path / "full", "600")
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and time.monotonic() - started < 15, output[-2000:]
    assert json.loads((tmp_path / "o.interrupted" / "results.json").read_text())["interrupted"] is True
    time.sleep(1.5)
    assert processes_with(marker) == []


# --------------------------------------------------------------- handshakes


@pytest.mark.parametrize(
    ("mode", "field"),
    [
        ("caps_string", "`$.result.capabilities`"),
        ("caps_unknown", "`$.result.capabilities`"),
        ("params_list", "`$.result.params`"),
        ("name_number", "`$.result.name`"),
        ("protocol_1", f"speaks protocol 1.1, the kit {PROTOCOL_VERSION}"),
    ],
)
def test_a_wrong_handshake_is_every_scenarios_error_naming_the_field(mode: str, field: str, tmp_path: Path) -> None:
    run = sbtck("--iut", _fake(mode), "--tags", "ACT-02", out=tmp_path)
    _one_line(run.output)
    assert run.code == 1
    scenarios = run.results()["scenarios"]
    assert scenarios and all(s["status"] == results.ERROR and field in s["failure"]["message"] for s in scenarios)


def test_a_factory_that_returns_no_implementation(tmp_path: Path) -> None:
    run = sbtck("--iut", "python:tests.fakes.hostile:not_an_implementation", "--tags", "ACT-02", out=tmp_path)
    _one_line(run.output)
    messages = {s["failure"]["message"] for s in run.results()["scenarios"]}
    assert messages and all("not an implementation" in m for m in messages)


# ------------------------------------------------------------ declarations

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
DECLARATIONS = {
    "alias bomb": (BOMB.encode(), "an alias (*a)"),
    "recursive alias": (b"a: &a [*a]\n", "an alias (*a)"),
    "infinity": (b"implementation: {name: x}\nparams: {delayed_retry_s: .inf}\n", "inf is not a finite number"),
    "not a number": (b"implementation: {name: x}\nparams: {delayed_retry_s: .nan}\n", "nan is not a finite number"),
    "complex key": (b"? {a: 1}\n: 2\n", "a key is a name, not a mapping"),
    "number key": (b"implementation: {name: x}\n1: 2\n", "is not text"),
    "control character": (b'implementation: {name: "\x01x"}\n', "special characters are not allowed"),
    "not UTF-8": (b"implementation: {name: \xff}\n", "not UTF-8 (byte 0xff)"),
    "params a list": (b"implementation: {name: x}\nparams: [1, 2]\n", "a mapping of parameter names"),
    "capabilities a string": (b"implementation: {name: x}\ncapabilities: activation\n", "a list of capabilities"),
    "a list": (b"- a\n- b\n", "a profile is a mapping"),
    "too large": (b"#" * (1024 * 1024 + 1), "a declaration file is at most"),
}


@pytest.mark.parametrize("case", sorted(DECLARATIONS))
def test_a_hostile_profile_is_one_line_naming_the_file(case: str, tmp_path: Path) -> None:
    content, said = DECLARATIONS[case]
    path = tmp_path / "profile.yaml"
    path.write_bytes(content)
    began = time.monotonic()
    with pytest.raises(DeclarationError) as refused:
        load_file(path)
    assert time.monotonic() - began < 2
    message = str(refused.value)
    assert said in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize("case", ["alias bomb", "infinity", "complex key", "control character", "not UTF-8"])
def test_hostile_expectations_and_topologies_are_one_line(case: str, tmp_path: Path) -> None:
    from sbtck.fixtures.topology import named

    content, _ = DECLARATIONS[case]
    (tmp_path / "t.yaml").write_bytes(content)
    for load in (lambda: load_expectations(tmp_path / "t.yaml"), lambda: named("t", tmp_path)):
        with pytest.raises(DeclarationError) as refused:
            load()
        assert "\n" not in str(refused.value) and "t.yaml" in str(refused.value)


def test_a_hostile_profile_through_the_command_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(BOMB)
    run = sbtck("--profile", str(tmp_path / "p.yaml"), out=tmp_path / "o")
    _one_line(run.output)
    assert run.code == 2 and "an alias (*a)" in run.output


# ------------------------------------------------------------ the command


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--iut", "cmd:'x"], "No closing quotation"),
        (["--out", "FILE"], "is a file; name a folder"),
        (["--features", "EMPTY"], "not a feature file pytest-bdd can read"),
        (["--tags", "ACT-01 and ("], ""),
        (["--features", "COLONLESS"], "line 2 reads 'Scenario [1] x': write 'Scenario:' with its colon"),
        (["--", "--fixtures"], "--fixtures runs no scenario, so gives no verdict"),
        (["--", "--collect-only"], "--collect-only runs no scenario"),
    ],
)
def test_bad_run_input_is_one_line(args: list[str], said: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    (tmp_path / "empty.feature").write_text("")
    (tmp_path / "colonless.feature").write_text('Feature: x\n  Scenario [1] x\n    Given the topology "activation"\n')
    files = {"FILE": "file", "EMPTY": "empty.feature", "COLONLESS": "colonless.feature"}
    args = [str(tmp_path / files[a]) if a in files else a for a in args]
    proc = kit("run", *args)
    _one_line(proc.stdout + proc.stderr)
    assert proc.returncode == 2 and said in proc.stdout + proc.stderr
    assert (tmp_path / "file").read_text() == "mine"


def test_a_second_run_on_one_out_while_the_first_writes_is_refused(tmp_path: Path) -> None:
    """Not left to replace the first's report half-way: the lock a run holds on --out (sbtck/reports/outfolder.py)."""
    out = tmp_path / "o"
    out.mkdir()
    held = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the first run holds it
        proc = kit("run", "--tags", "ACT-02", "--out", str(out))
    finally:
        os.close(held)
    _one_line(proc.stdout + proc.stderr)
    assert proc.returncode == 2 and "another sbtck command is writing there" in proc.stderr
    assert list(out.iterdir()) == []
    assert kit("run", "--tags", "ACT-02", "--out", str(out)).returncode == 0  # once it is let go


def test_a_broken_run_leaves_the_previous_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert sbtck("--tags", "ACT-13", out=out).code == 0
    before = (out / "index.html").read_bytes()
    broken = sbtck("--tags", "ACT-01 and (", out=out)
    assert broken.code == 2
    assert (out / "index.html").read_bytes() == before
    assert "conforms on the 0" not in (out / "index.html").read_text()


@pytest.mark.parametrize(
    ("name", "settings", "said"),
    [
        ("pyproject.toml", b"[tool]\nsbtck = 5\n", "the sbtck settings are a table"),
        ("pyproject.toml", b'[tool.sbtck]\niut = "\xff"\n', "not UTF-8"),
        ("sbtck.toml", b'iut = "\xff"\n', "not UTF-8"),
        ("sbtck.toml", b"iut = [1\n", "not valid TOML"),
        ("sbtck.toml", b"tags = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
        ("sbtck.toml", b'tags = "' + b"x" * 2_000_000 + b'"\n', "a settings file is at most 1048576 bytes"),
    ],
    ids=["tool-not-table", "pyproject-utf8", "utf8", "toml", "deep", "huge"],
)
def test_malformed_settings_are_one_line(name: str, settings: bytes, said: str, tmp_path: Path) -> None:
    (tmp_path / name).write_bytes(settings)
    proc = subprocess.run(
        [sys.executable, "-m", "sbtck", "run"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    _one_line(proc.stdout + proc.stderr)
    assert proc.returncode == 2 and said in proc.stderr


SCENARIO = (
    '{"id": "a", "feature_path": "f", "feature_name": "n", "name": "x", "line": 3, "tags": [], "status": "passed"'
)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{}", "no list of scenarios"),
        ('{"scenarios": [', "not a results.json"),
        ('{"scenarios": [1]}', "Expected `object`, got `int` - at `$.scenarios[0]`"),
        ('{"scenarios": [{}]}', "Object missing required field `id` - at `$.scenarios[0]`"),
        ('{"scenarios": [], "implementation": 5}', "Expected `object`, got `int` - at `$.implementation`"),
        ('{"scenarios": [], "profile": []}', "Expected `object`, got `array` - at `$.profile`"),
        ('{"scenarios": [' + SCENARIO + ', "steps": "x"}]}', "got `str` - at `$.scenarios[0].steps`"),
        ('{"scenarios": [' + SCENARIO.replace("3", "[3]") + "}]}", "got `array` - at `$.scenarios[0].line`"),
        ('{"scenarios": [' + SCENARIO + ', "events": [1]}]}', "- at `$.scenarios[0].events[0]`"),
    ],
)
def test_report_on_a_wrong_results_file_names_it(content: str, said: str, tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(content)
    proc = kit("report", str(tmp_path / "results.json"), "--out", str(tmp_path / "o"))
    _one_line(proc.stderr)
    assert proc.returncode == 2 and said in proc.stderr and "results.json" in proc.stderr


def test_report_never_overwrites_a_runs_own_folder(tmp_path: Path) -> None:
    run = sbtck("--tags", "ACT-13", out=tmp_path / "run")
    page = (run.out / "index.html").read_bytes()
    proc = kit("report", str(run.out / "results.json"), "--out", str(run.out))
    assert proc.returncode == 2 and "would be overwritten" in proc.stderr
    assert (run.out / "index.html").read_bytes() == page


# ------------------------------------------------------------------ serving


def test_serve_refuses_a_port_out_of_range_and_one_in_use() -> None:
    proc = kit("serve", "--tcp", "127.0.0.1:99999")
    assert proc.returncode == 2 and "a port is a number from 0" in proc.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = kit("serve", "--tcp", f"127.0.0.1:{port}")
    _one_line(proc.stderr)
    assert proc.returncode == 2 and "cannot listen there" in proc.stderr


ENDLESS = {"name": "sql1", "msdb_routes": [{"name": "R", "lifetime_s": 1e308}]}


def test_serve_answers_an_engine_failure_and_goes_on() -> None:
    lines = [
        # a route living 1e308 seconds: a topology of the right form whose expiry the engine cannot reckon
        {"id": 1, "op": "execute", "command": {"kind": "start", "at_ms": 0, "topology": {"instances": [ENDLESS]}}},
        {"id": 2, "op": "hello", "protocol": "2.0"},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "sbtck", "serve", "--stdio"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert answers[0]["ok"] is False and "failed on this request" in answers[0]["error"]
    assert answers[0]["fault"] is True  # a crash, not a refusal
    assert answers[1]["ok"] is True and proc.returncode == 0
    _one_line(proc.stderr)


def test_serve_tcp_serves_clients_at_once_and_closes_an_idle_one() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "sbtck", "serve", "--tcp", "127.0.0.1:0"],
        env={**os.environ, "SBTCK_SERVE_IDLE_S": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)  # connects and says nothing
        with socket.create_connection(("127.0.0.1", port), timeout=5) as busy:
            busy.sendall(b'{"id": 1, "op": "hello", "protocol": "1.0"}\n')
            assert json.loads(busy.makefile().readline())["ok"] is True
        idle.settimeout(5)
        assert idle.recv(10) == b"", "the idle connection was not closed"
        idle.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_serve_takes_typed_requests_and_bounds_time() -> None:
    """A field of another type, a time past the year 9999 or a day-long jump is refused at once, never run."""
    start = {"kind": "start", "at_ms": 0, "topology": {"instances": []}}
    commands = [
        start,
        {"kind": "advance_time", "at_ms": "soon"},
        {"kind": "advance_time", "at_ms": 1e300},
        {"kind": "advance_time", "at_ms": True},
        {"kind": "advance_time", "at_ms": 10**15},
        {"kind": "advance_time", "at_ms": 10**13},
        {"kind": "send", "at_ms": 1, "dialog": ["D1"]},
        {"kind": "advance_time", "at_ms": 5000},
    ]
    lines = [{"id": i, "op": "execute", "command": command} for i, command in enumerate(commands, 1)]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sbtck", "serve", "--stdio"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert time.monotonic() - started < 30
    errors = [json.loads(line).get("error") for line in proc.stdout.splitlines()]
    assert errors == [
        None,
        "command 'advance_time': at_ms is an integer, got 'soon'",
        "command 'advance_time': at_ms is an integer, got 1e+300",
        "command 'advance_time': at_ms is an integer, got True",
        "command 'advance_time': at_ms is from 0 to 253402300799999 (the end of the year 9999), got 1000000000000000",
        "advance_time at 10000000000000 is 10000000000 s after the previous command; the reference moves its clock "
        "at most 86400 s at once (SBTCK_MAX_ADVANCE_S)",
        "command 'send': dialog is a string, got ['D1']",
        None,
    ]


def test_a_scenario_that_jumps_years_ahead_is_an_error_at_once(tmp_path: Path) -> None:
    (tmp_path / "far.feature").write_text(
        "@ACT-02 @requires-activation\nFeature: Far - a jump of years\n\n  Background:\n"
        '    Given the topology "activation"\n\n  Scenario: [1] Time passes far ahead\n'
        "    When time passes to second 100000000000\n"
        '    Then queue "StallQueue" has a queue monitor\n'
    )
    started = time.monotonic()
    run = sbtck("--features", str(tmp_path / "far.feature"), out=tmp_path / "o", timeout=60)
    assert time.monotonic() - started < 30
    [scenario] = run.results()["scenarios"]
    assert scenario["status"] == results.ERROR
    assert (
        "the reference moves its clock at most 86400 s at once (SBTCK_MAX_ADVANCE_S)" in scenario["failure"]["message"]
    )


def test_serve_holds_no_more_than_the_line_limit_and_serves_the_next_line() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "sbtck", "serve", "--tcp", "127.0.0.1:0"],
        env={**os.environ, "SBTCK_MAX_LINE_BYTES": "1000000"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            for _ in range(200):  # 200 MB in one line
                client.sendall(b"x" * 1_000_000)
            client.sendall(b'\n{"id": 2, "op": "hello", "protocol": "2.0"}\n')
            answers = client.makefile()
            refused, hello = json.loads(answers.readline()), json.loads(answers.readline())
        assert refused["error"] == "a request line longer than 1000000 bytes (SBTCK_MAX_LINE_BYTES)"
        assert hello["id"] == 2 and hello["ok"] is True  # the next line is served
        rss_kib = int(next(line for line in Path(f"/proc/{server.pid}/status").read_text().splitlines()
                           if line.startswith("VmRSS")).split()[1])  # fmt: skip
        assert rss_kib < 200 * 1024
    finally:
        server.terminate()
        server.wait(timeout=10)


# --------------------------------------------------------------- workloads


def test_workload_out_refuses_what_it_did_not_make(tmp_path: Path) -> None:
    from sbtck.workloads.output import Output

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    for folder, said in ((theirs, "not made by sbtck workload"), (Path("/"), "root"), (Path.home(), "home")):
        with pytest.raises(OutputError, match=said):
            Output(folder).prepare()
    assert (theirs / "notes.txt").read_text() == "mine"


def _decoys(root: Path) -> dict[str, bytes]:
    """A user's folder beside --out, read whole: no case may change a byte of it."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("planted", ["marker", "incomplete", "manifest folder", "stale previous", "stale staging"])
def test_workload_out_follows_no_link_planted_in_it(planted: str, tmp_path: Path) -> None:
    from sbtck.workloads.output import INCOMPLETE, MARKER, Output

    user = tmp_path / "user"
    (user / "docs").mkdir(parents=True)
    (user / "thesis.tex").write_text("years of work")
    (user / "docs" / "thesis.tex").write_text("the other copy")
    before = _decoys(user)
    out = tmp_path / "w"
    if planted != "marker":  # a finished job's folder, then the link
        done = Output(out)
        done.prepare()
        done.part("docs").mkdir()
        (done.part("docs") / "thesis.tex").write_text("kit's")
        done.finish({"worlds": 1})
    else:
        out.mkdir()
    if planted == "marker":
        (out / MARKER).symlink_to(user / "thesis.tex")
    elif planted == "incomplete":
        (out / INCOMPLETE).symlink_to(user / "thesis.tex")
    elif planted == "manifest folder":
        shutil.rmtree(out / "docs")
        (out / "docs").symlink_to(user / "docs")
    elif planted == "stale previous":
        (out / ".previous-deadbeef").symlink_to(user)
    else:
        (out / ".staging-deadbeef").symlink_to(user)
    job = Output(out)
    try:
        job.prepare()
    except OutputError as refused:
        assert planted == "marker" and "not made by sbtck workload" in str(refused)
    else:
        job.finish({"worlds": 2})
        again = Output(out)
        again.prepare()
        again.fail("stopped")
    assert _decoys(user) == before


def test_an_interrupted_runs_report_is_not_written_through_a_planted_link(tmp_path: Path) -> None:
    from sbtck.reports import publish
    from sbtck.reports import results as results_module

    user = tmp_path / "user"
    user.mkdir()
    (user / "results.json").write_text("a user's own file")
    before = _decoys(user)
    (tmp_path / "report.interrupted").symlink_to(user)
    said: list[str] = []
    record = results_module.ScenarioRecord("f::s", "f.feature", "F", "s", 1, [], status=results.PASSED)
    where = publish.publish(tmp_path / "report", {"interrupted": True}, [record], None, said.append)
    assert where is None and "is a symbolic link" in said[-1]
    assert _decoys(user) == before


def test_workload_out_keeps_a_users_file_and_one_job_at_a_time(tmp_path: Path) -> None:
    from sbtck.workloads.output import INCOMPLETE, SUMMARY, Output

    out = tmp_path / "w"
    first = Output(out)
    first.prepare()
    with pytest.raises(OutputError, match="another sbtck workload job"):
        Output(out).prepare()
    first.part("reproducers").mkdir()
    (first.part("reproducers") / "seed-1.feature").write_text("kit's")
    first.finish({"worlds": 1})
    (out / "reproducers" / "mine.feature").write_text("user's")
    # a second job that fails keeps the first job's results, and the user's file
    second = Output(out)
    second.prepare()
    second.fail("it broke")
    assert json.loads((out / SUMMARY).read_text()) == {"worlds": 1}
    assert (out / "reproducers" / "seed-1.feature").read_text() == "kit's"
    assert "previous, finished job" in (out / INCOMPLETE).read_text()
    # a third that finishes replaces the kit's files only
    third = Output(out)
    third.prepare()
    third.finish({"worlds": 2})
    assert (out / "reproducers" / "mine.feature").read_text() == "user's"
    assert not (out / "reproducers" / "seed-1.feature").exists()
    assert not (out / INCOMPLETE).exists() and json.loads((out / SUMMARY).read_text()) == {"worlds": 2}


# ------------------------------------------------------------------ reports


def test_the_page_shows_hidden_characters_and_shortens_huge_values(tmp_path: Path) -> None:
    from sbtck.reports import html

    huge = "y" * 10_000_000
    record = results.ScenarioRecord(
        "f.feature::[1] a\u202egnp.exe",
        "features/activation/01_f.feature",
        "F",
        "[1] a\u202egnp.exe\x07",
        1,
        [],
        [],
        results.FAILED,
        failure={"step": "", "line": 1, "kind": results.FAILED, "message": huge},
    )
    results.write(tmp_path / "results.json", {"implementation": {"name": "x"}}, [record])
    page = html.build([tmp_path / "results.json"], tmp_path / "index.html").read_text()
    assert "\u202e" not in page and "\x07" not in page
    assert "[U+202E]" in page and "[U+0007]" in page
    assert len(page) < 2_000_000 and "the whole value is in results.json" in page
    assert len(json.loads((tmp_path / "results.json").read_text())["scenarios"][0]["failure"]["message"]) == len(huge)
    from sbtck.reports import junit

    junit.write(*results.read(tmp_path / "results.json"), tmp_path / "junit.xml")
    xml = (tmp_path / "junit.xml").read_text()
    assert "\u202e" not in xml and "[U+202E]" in xml and "[U+0007]" in xml  # as the page shows them


def test_an_implementations_words_reach_the_terminal_without_their_control_sequences(tmp_path: Path) -> None:
    """Escape sequences that would clear the screen or set the title, in a refusal and in stderr, are shown."""
    proc = kit("run", "--iut", "python:tests.fakes.hostile:escapes", "--tags", "ACT-09", "--out", str(tmp_path / "o"))
    output = proc.stdout + proc.stderr
    assert "\x1b" not in output and "\x07" not in output
    assert "[U+001B][2J" in output and "[U+D800]" in output  # a lone surrogate too: no UTF-8 file takes one
    assert proc.returncode == 1 and "[U+D800]" in (tmp_path / "o" / "index.html").read_text()


def test_runs_of_implementations_with_one_name_are_told_apart(tmp_path: Path) -> None:
    a = sbtck("--tags", "ACT-13", out=tmp_path / "a")
    b = sbtck("--tags", "ACT-13", "--iut", "python:tests.variants.activation:crashes_on_d2", out=tmp_path / "b")
    data = json.loads((b.out / "results.json").read_text())
    data["implementation"]["name"] = a.results()["implementation"]["name"]
    data["implementation"]["version"] = a.results()["implementation"]["version"]
    (b.out / "results.json").write_text(json.dumps(data))
    proc = kit("report", str(a.out / "results.json"), str(b.out / "results.json"), "--out", str(tmp_path / "both"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "both" / "index.html").read_text()
    assert "(run 1: reference" in page and "(run 2: python:tests.variants.activation:crashes_on_d2" in page


# -------------------------------------------------------- other plugins


def test_reruns_give_one_row_per_scenario_marked_flaky(tmp_path: Path) -> None:
    proc = kit(
        "run",
        "--iut",
        "python:tests.fakes.hostile:fails_once",
        "--tags",
        "ACT-13",
        "--out",
        str(tmp_path / "o"),
        "--",
        "--reruns",
        "2",
        "-p",
        "rerunfailures",
    )
    scenarios = json.loads((tmp_path / "o" / "results.json").read_text())["scenarios"]
    ids = [s["id"] for s in scenarios]
    assert len(ids) == len(set(ids))
    flaky = [s for s in scenarios if s["flaky"]]
    assert flaky and all(s["status"] == results.PASSED for s in scenarios)
    assert proc.returncode == 0, proc.stdout[-2000:]
    # JUnit as Maven Surefire writes a rerun that passed; Cucumber by a tag and the earlier attempt in words
    cases = ET.parse(tmp_path / "o" / "junit.xml").getroot().iter("testcase")
    marked = {c.get("name"): c.find("flakyFailure") for c in cases}
    assert {n for n, f in marked.items() if f is not None} == {s["name"] for s in flaky}
    earlier = flaky[0]["earlier_failures"]
    assert len(earlier) == 1 and earlier[0]["status"] in results.AGAINST
    first = marked[flaky[0]["name"]]
    assert first is not None and first.get("type") == earlier[0]["status"]
    assert "refused on the first attempt" in (first.findtext("stackTrace") or "")
    elements = [e for f in json.loads((tmp_path / "o" / "cucumber.json").read_text()) for e in f["elements"]]
    tagged = {e["name"]: e for e in elements if {"name": "@flaky", "line": e["line"] - 1} in e["tags"]}
    assert set(tagged) == {s["name"] for s in flaky}
    assert tagged[flaky[0]["name"]]["description"].startswith(f"attempt 1 {earlier[0]['status']}: ")


def test_other_reporting_plugins_keep_real_time(tmp_path: Path) -> None:
    proc = kit(
        "run",
        "--tags",
        "ACT-13",
        "--out",
        str(tmp_path / "o"),
        "--",
        "--cucumberjson",
        str(tmp_path / "bdd.json"),
        "--html",
        str(tmp_path / "pytest-html.html"),
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    durations = [
        step["result"]["duration"]
        for feature in json.loads((tmp_path / "bdd.json").read_text())
        for element in feature["elements"]
        for step in element["steps"]
    ]
    # nanoseconds: a step of a frozen-clock scenario takes well under a minute, never "thousands of years"
    assert durations and all(0 <= d < 60 * 10**9 for d in durations)
    html_page = (tmp_path / "pytest-html.html").read_text()
    blob = json.loads(unescape(html_page.split('data-jsonblob="', 1)[1].split('"', 1)[0]))
    shown = [t["duration"] for tests in blob["tests"].values() for t in tests]
    assert shown and all(re.fullmatch(r"\d+ ms|00:00:\d\d", d) for d in shown), shown


def test_allure_records_every_scenario_the_not_applicable_ones_too(tmp_path: Path) -> None:
    """allure-pytest-bdd records a scenario once it starts: a scenario not applicable is skipped as it starts, so
    it is in allure's results as skipped, as it is in the kit's own."""
    profile = yaml.safe_load((ROOT / "engine" / "profile.yaml").read_text())
    profile["capabilities"].remove("mirroring")
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    allure = tmp_path / "allure"
    proc = kit(
        "run",
        "--profile",
        str(tmp_path / "profile.yaml"),
        "--out",
        str(tmp_path / "o"),
        "--",
        "--alluredir",
        str(allure),
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    kits = {s["name"]: s["status"] for s in json.loads((tmp_path / "o" / "results.json").read_text())["scenarios"]}
    recorded = [json.loads(f.read_text()) for f in allure.glob("*-result.json")]
    assert len(recorded) == len(kits) and results.NOT_APPLICABLE in kits.values()
    allures = {result["name"]: result["status"] for result in recorded}
    assert {n for n, status in allures.items() if status == "skipped"} == {
        n for n, status in kits.items() if status == results.NOT_APPLICABLE
    }


@pytest.mark.parametrize(
    ("factory", "tags", "said"),
    [
        (
            "no_from_target",
            "RTM-8",
            "query_view 'sys.transmission_queue' at sql1: the row `$.result.rows[0]` has no column 'from_target'; "
            "the contract declares instance, dialog, message_sequence_number, from_target, to_service_name, "
            "transmission_status, received_ms",
        ),
        (
            "rows_without_sequence",
            "ACT-09",
            "a rows_returned event: the row `$.events[",
        ),
        (
            "times_as_text",
            "RTM-8",
            "query_view 'sys.transmission_queue' at sql1: the row `$.result.rows[0]` has 'received_ms' = "
            "'2026-01-01T00:00:05' (string); the contract declares integer",
        ),
        (
            "sequence_as_text",
            "ACT-09",
            "'message_sequence_number' = '0' (string); the contract declares integer",
        ),
        (
            "rows_as_a_count",
            "RTM-8",
            "query_view: a result that breaks the protocol: Expected `array`, got `int` - at `$.result.rows`; "
            "the contract declares ViewResult (docs/protocol.md#query_view)",
        ),
        (
            "started_as_number",
            "PER-1B",
            "query_view 'sbtck.periodic_state' at sql1: the row `$.result.rows[0]` has 'broker_started' = 1 (integer); "
            "the contract declares boolean",
        ),
    ],
)
def test_an_answer_without_a_declared_field_or_with_another_type_is_an_error_naming_it(
    factory: str, tags: str, said: str, tmp_path: Path
) -> None:
    """Not a bare KeyError or a step's puzzling failure: one line naming the command, the view or event, the field
    and what the contract declares."""
    run = sbtck("--iut", f"python:tests.fakes.incomplete:{factory}", "--tags", tags, out=tmp_path)
    assert run.code == 1, run.output[-3000:]
    errors = [s for s in run.results()["scenarios"] if s["status"] == "error"]
    assert errors, run.output[-3000:]
    for scenario in errors:
        message = scenario["failure"]["message"]
        assert "\n" not in message and said in message, message
        assert "KeyError" not in message


def test_a_route_table_is_replaced_whatever_the_view_says_and_a_wrong_view_is_named(tmp_path: Path) -> None:
    """The kit drops the routes the scenario made, not those sys.routes lists, then holds the view to the result."""
    run = sbtck("--iut", "python:tests.fakes.incomplete:empty_routes_view", "--tags", "RTM-2", out=tmp_path)
    assert run.code == 1, run.output[-3000:]
    failed = [s for s in run.results()["scenarios"] if s["status"] == "failed"]
    assert failed, run.output[-3000:]
    for scenario in failed:
        assert scenario["failure"]["step"].startswith("And the routes in") or scenario["failure"]["step"].startswith(
            "Given the routes in"
        ), scenario["failure"]
        message = scenario["failure"]["message"]
        assert "(the routes just set) differs: expected row 1 is missing (name " in message, message


def test_a_profile_that_disagrees_with_the_handshake_is_every_scenarios_error_naming_both(tmp_path: Path) -> None:
    profile = yaml.safe_load(PROFILE_PATH.read_text())
    profile["params"]["delayed_retry_s"] = profile["params"]["delayed_retry_s"] + 7
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    run = sbtck("--profile", str(path), "--tags", "RTM-8", out=tmp_path / "out")
    assert run.code == 1, run.output[-3000:]
    scenarios = run.results()["scenarios"]
    assert scenarios and {s["status"] for s in scenarios} == {"error"}
    message = scenarios[0]["failure"]["message"]
    declared = yaml.safe_load(PROFILE_PATH.read_text())["params"]["delayed_retry_s"]
    assert f"delayed_retry_s = {declared + 7:g} in the profile, {declared!r} in the handshake" in message, message


@pytest.mark.parametrize(
    "shift_ms", [-(10**15), 2**62, 10**400, 1], ids=["far past", "far future", "400 digits", "1 ms"]
)
def test_an_event_stamped_outside_its_answer_is_an_error_never_a_verdict(
    shift_ms: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events are what happened since the previous command, up to this one: an arrival forged into the far past or
    future (or a moment ahead) never counts towards "conforms"."""
    monkeypatch.setenv("SBTCK_FAKE_SHIFT_MS", str(shift_ms))
    run = sbtck("--iut", "python:tests.fakes.stamps:stamped", "--tags", "ACT-06", out=tmp_path)
    assert run.code == 1, run.output[-3000:]
    _one_line(run.output)
    scenarios = run.results()["scenarios"]
    errors = [s for s in scenarios if s["status"] == "error"]
    assert errors and {s["status"] for s in scenarios} <= {"error", "passed"}, run.output[-3000:]
    assert all("is stamped" in s["failure"]["message"] and "outside" in s["failure"]["message"] for s in errors)
