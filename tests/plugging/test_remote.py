"""Implementations in other processes: faults are errors with their cause, and the run goes on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sbtck.contract import PROTOCOL_VERSION
from tests.helpers import ROOT, sbtck

FAKE = ROOT / "tests" / "fakes" / "misbehaving.py"
# some of these scenarios send messages, the others do not
TAGS = "ACT-02 or ACT-09"


def _fake(mode: str) -> str:
    return f"cmd:{sys.executable} {FAKE} {mode}"


@pytest.mark.parametrize(
    ("mode", "cause"),
    [
        ("crash", "exited with status 3 while answering send"),
        ("garbage", "wrote a line that is not an answer to send: not JSON"),
        ("wrong_id", "answered request"),
        ("hang", "gave no answer to send within 1 seconds"),
    ],
)
def test_a_fault_is_an_error_with_its_cause_and_stderr_and_the_next_scenario_runs(
    mode: str, cause: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBTCK_REQUEST_TIMEOUT", "1")
    run = sbtck("--iut", _fake(mode), "--tags", TAGS, out=tmp_path, timeout=120)
    assert run.code == 1, run.output[-2000:]
    scenarios = run.results()["scenarios"]
    sending = [s for s in scenarios if any("sent on dialog" in step["text"] for step in s["steps"])]
    errors = [s for s in scenarios if s["status"] == "error"]
    assert sending and errors == sending, [(s["name"], s["status"]) for s in scenarios]
    assert all(s["status"] == "passed" for s in scenarios if s not in sending)
    for record in errors:
        assert cause in record["failure"]["message"]
        assert f"fake broker: about to {mode} on send" in record["failure"]["message"]


def test_another_protocol_version_makes_every_scenario_an_error_saying_so(tmp_path: Path) -> None:
    run = sbtck("--iut", _fake("protocol_1"), "--tags", TAGS, out=tmp_path)
    assert run.code == 1
    scenarios = run.results()["scenarios"]
    want = f"speaks protocol 1.1, the kit {PROTOCOL_VERSION}: no scenario is judged across major versions"
    assert scenarios and all(want in s["failure"]["message"] for s in scenarios)
    assert all("docs/changes.md" in s["failure"]["message"] for s in scenarios)


def test_serve_refuses_any_address_but_loopback() -> None:
    from sbtck.iut.serve import serve_tcp

    with pytest.raises(ValueError, match=r"127\.0\.0\.1 only"):
        serve_tcp(lambda: None, "0.0.0.0:4000")  # type: ignore[arg-type,return-value]


def test_identical_results_in_process_over_a_pipe_and_over_tcp(tmp_path: Path) -> None:
    import subprocess

    in_process = sbtck(out=tmp_path / "in")
    piped = sbtck("--iut", f"cmd:{sys.executable} -m sbtck.cli serve --stdio", out=tmp_path / "cmd")
    server = subprocess.Popen(
        [sys.executable, "-m", "sbtck.cli", "serve", "--tcp", "127.0.0.1:0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip().rsplit(":", 1)[1]
        over_tcp = sbtck("--iut", f"tcp:127.0.0.1:{port}", out=tmp_path / "tcp")
    finally:
        server.kill()
    assert in_process.code == piped.code == over_tcp.code == 0
    assert in_process.outcome() == piped.outcome() == over_tcp.outcome()
