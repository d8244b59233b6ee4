"""A failed world's record and `sbtck workload show`: where the sides part and what differs, without Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sbtck.cli import main
from sbtck.reports.results import FAILED
from sbtck.workloads import record
from sbtck.workloads.output import SUMMARY
from sbtck.workloads.stage import Checker
from tests.helpers import ROOT
from tests.variants import routing

# routing.network_before_mirror names a mirror's partner among the candidates; seed 4 is its first failing world
SEED = 4


@pytest.fixture(scope="module")
def failed() -> dict[str, Any]:
    outcome = Checker(routing.network_before_mirror, True).check(SEED)
    assert outcome.outcome == FAILED
    return outcome.row()


def _folder(tmp: Path, rows: list[dict[str, Any]], worlds: int = 10) -> Path:
    summary = {"kind": "sbtck-workload-summary", "first_seed": 0, "worlds": worlds, "failed_worlds": len(rows)}
    (tmp / SUMMARY).write_text(json.dumps(summary))
    record.write((record.record(r) for r in rows), tmp)
    return tmp


def test_the_record_names_the_step_the_command_the_rule_and_the_field_that_differs(failed: dict[str, Any]) -> None:
    rec = record.record(failed)
    assert (rec["seed"], rec["outcome"], rec["rule"], rec["step"]) == (SEED, FAILED, "RTC-3", 2)
    script = json.loads(failed["script"])
    assert rec["command"] == script[2] and rec["command"]["kind"] == "send"
    assert rec["steps"] == len(script)
    # the route chosen at the sender: the reference names one candidate, the variant the partner too
    mine = [e for e in rec["implementation"]["events"] if e["differs"]]
    theirs = [e for e in rec["reference"]["events"] if e["differs"]]
    assert [e["event"]["kind"] for e in mine] == [e["event"]["kind"] for e in theirs] == ["route_chosen"]
    assert mine[0]["differs"] == theirs[0]["differs"] == ["candidates"]
    assert mine[0]["event"]["candidates"] != theirs[0]["event"]["candidates"]
    assert record.differing_columns(rec) == ["candidates"]
    # the events that agree are there too, unmarked: the step is shown whole
    assert len(rec["implementation"]["events"]) == len(json.loads(failed["iut_trace"])[2]["events"])
    assert all(e["differs"] == [] for e in rec["implementation"]["events"] if e["event"]["kind"] != "route_chosen")


def test_an_undecided_worlds_record_names_the_step_its_furthest_branch_differed_at(failed: dict[str, Any]) -> None:
    # the detail of an undecided world begins with why (stage.undecided_reason); the step is the one it names, not
    # the first at which the raw traces differ in anything (a report no document times, say)
    rule, at = record._step_of(failed["detail"])
    assert rule is not None and at is not None
    assert at > 0
    detail = f"search budget spent, differing at {rule}: {failed['detail']}"
    traced = json.loads(failed["iut_trace"])
    traced[0]["events"].append({"kind": "database_broker_started", "at_ms": 0})  # a report not compared
    undecided = record.record({**failed, "outcome": "undecided", "detail": detail, "iut_trace": json.dumps(traced)})
    assert (undecided["step"], undecided["rule"]) == (at, rule)


def _row(
    script: list[dict[str, Any]], mine: list[dict[str, Any]], theirs: list[dict[str, Any]], rule: str = "DIFFERENCE"
) -> dict[str, Any]:
    """A failed world's row as the stage writes it: its script, and each side's answers (MINE the implementation's,
    THEIRS the reference's), each step {kind, error, result, events} with what is left out filled in."""

    def trace(steps: list[dict[str, Any]]) -> str:
        return json.dumps([{"error": None, "result": None, "events": [], **step} for step in steps])

    return {
        "seed": 7,
        "outcome": FAILED,
        "rules": [rule],
        "detail": f"{rule} at step 1: {script[1]['kind']} ...",
        "script": json.dumps(script),
        "iut_trace": trace(mine),
        "reference_trace": trace(theirs),
    }


def test_an_event_without_a_partner_and_a_view_row_that_differs_are_marked() -> None:
    script: list[dict[str, Any]] = [{"kind": "start"}, {"kind": "query_view", "view": "sys.routes", "database": None}]
    dropped = {"kind": "message_dropped", "at_ms": 1, "reason": "x"}
    mine_rows = [{"name": "R1", "address": "tcp://a:1", "lifetime": 5}]
    theirs_rows = [{"name": "R1", "address": "TCP://A:1", "lifetime": 6}, {"name": "R2"}]
    row = _row(
        script,
        [{"kind": "start"}, {"kind": "query_view", "result": {"rows": mine_rows}, "events": [dropped]}],
        [{"kind": "start"}, {"kind": "query_view", "result": {"rows": theirs_rows}}],
    )
    rec = record.record(row)
    assert rec["step"] == 1 and rec["rule"] == "DIFFERENCE"
    assert rec["implementation"]["events"] == [
        {"event": {"kind": "message_dropped", "at_ms": 1, "reason": "x"}, "differs": None}
    ]
    # the address differs only in case, which the comparison allows: not marked
    assert [r["differs"] for r in rec["implementation"]["rows"]] == [["lifetime"]]
    assert [r["differs"] for r in rec["reference"]["rows"]] == [["lifetime"], None]
    text = record.text(rec)
    assert ">>lifetime=5<<" in text and ">>lifetime=6<<" in text and " !message_dropped" in text and " !row " in text


def test_show_prints_one_line_a_world_and_a_world_in_full(
    failed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _folder(tmp_path, [failed])
    assert main(["workload", "show", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"1 failed or undecided worlds of 10 in {out}"
    assert lines[1].startswith(f"seed {SEED} ") and "RTC-3" in lines[1] and "at step 2 (send)" in lines[1]
    assert lines[1].endswith("differs: candidates")
    assert main(["workload", "show", str(out), str(SEED)]) == 0
    full = capsys.readouterr().out
    assert f"world {SEED}: failed, rule RTC-3" in full and "the sides part at step 2 of" in full
    assert "command: send " in full and ">>candidates=" in full and full.count(">>candidates=") == 2
    page = (out / record.PAGE).read_text()
    assert f'id="seed-{SEED}"' in page and '<td class="differs">' in page


def test_a_hostile_text_an_implementation_reports_is_escaped_and_shown_in_failures_html(tmp_path: Path) -> None:
    """failures.html is drawn from a template through the report page's escaping (issue 46, item 7): markup an
    implementation puts in a field is text, and a hidden character is shown as [U+200B], not hidden."""
    hostile = 'R1<script>alert("x")</script>\u200b\u202e'
    script: list[dict[str, Any]] = [{"kind": "start"}, {"kind": "query_view", "view": "sys.routes", "database": None}]
    row = _row(
        script,
        [{"kind": "start"}, {"kind": "query_view", "error": hostile, "result": {"rows": [{"name": hostile}]}}],
        [{"kind": "start"}, {"kind": "query_view", "result": {"rows": [{"name": "R1"}]}}],
    )
    out = _folder(tmp_path, [row])
    page = (out / record.PAGE).read_text()
    shown = "R1&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;[U+200B][U+202E]"
    # the differing name in its marked cell, and the refusal, each escaped and made visible
    assert f'<td class="differs">{shown}</td>' in page
    assert f"<p>Refused: <code>{shown}</code></p>" in page
    assert "<script" not in page and "\u200b" not in page and "\u202e" not in page


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("empty", [], "is not a finished workload job's output"),
        ("other", [], "is not a finished workload job's output"),
        ("old", [], "has no failures.jsonl"),
        ("job", ["5"], "seed 5 is not a failed or undecided world of"),
        ("job", ["99"], "the job ran seeds 0 to 9"),
    ],
)
def test_show_refuses_what_is_not_a_workloads_output_and_an_unknown_seed(
    failed: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    args: list[str],
    message: str,
) -> None:
    if setup == "other":
        (tmp_path / SUMMARY).write_text('{"kind": "something else"}')
    elif setup == "old":
        (tmp_path / SUMMARY).write_text('{"kind": "sbtck-workload-summary"}')
    elif setup == "job":
        _folder(tmp_path, [failed])
    assert main(["workload", "show", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err


def test_show_refuses_a_seed_that_is_not_a_number(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["workload", "show", str(tmp_path), "four"])
    assert exit.value.code == 2


def test_show_needs_neither_spark_nor_pyarrow(failed: dict[str, Any], tmp_path: Path) -> None:
    out = _folder(tmp_path, [failed])
    # a child in which importing either fails, as where neither extra is installed
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['pyarrow'] = None\n"
        "from sbtck.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code, "workload", "show", str(out), str(SEED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert ">>candidates=" in shown.stdout


def test_what_the_stage_compares_by_reference_or_not_at_all_is_never_marked() -> None:
    """A group or spid named otherwise, a row's column of the implementation's own: the verdict takes them as
    agreeing (issue 43: a clean-room author was led astray by brackets on `rows` where only such columns differed)."""
    rows_mine = [{"dialog": "D1", "message_sequence_number": 0, "conversation_group": "G-77", "message_body": "hi"}]
    rows_theirs = [{"dialog": "D1", "message_sequence_number": 0, "conversation_group": "D1", "message_body": ""}]
    returned = {"kind": "rows_returned", "at_ms": 5, "instance": "sql1", "database": "db", "queue": "Q1"}
    exited = {"kind": "procedure_exited", "at_ms": 5, "instance": "sql1", "database": "db", "queue": "Q1", "task": 1}
    mine = [{**returned, "session": "Q1#1", "conversation_group": "G-77", "rows": rows_mine}, {**exited, "spid": 90}]
    theirs = [{**returned, "session": "Q1#1", "conversation_group": "D1", "rows": rows_theirs}, {**exited, "spid": 51}]
    script = [{"kind": "start"}, {"kind": "advance_time"}]
    row = _row(
        script,
        [{"kind": "start"}, {"kind": "advance_time", "events": mine}],
        [{"kind": "start"}, {"kind": "advance_time", "events": theirs}],
        rule="ACT-09",
    )
    rec = record.record(row)
    assert [e["differs"] for e in rec["implementation"]["events"]] == [[], []]
    # and a field that differs after all is still marked
    theirs[1]["task"] = 2
    rec = record.record(
        _row(
            script,
            [{"kind": "start"}, {"kind": "advance_time", "events": mine}],
            [{"kind": "start"}, {"kind": "advance_time", "events": theirs}],
            rule="ACT-09",
        )
    )
    assert rec["implementation"]["events"][0]["differs"] == []
    assert "task" in rec["implementation"]["events"][1]["differs"]


def test_show_piped_into_a_reader_that_stops_ends_quietly(failed: dict[str, Any], tmp_path: Path) -> None:
    """`sbtck workload show OUT | head` (a clean-room author's BrokenPipeError traceback): ends as cat does."""
    out = _folder(tmp_path, [{**failed, "seed": seed} for seed in range(1500)], worlds=1500)
    show = subprocess.Popen(
        [sys.executable, "-m", "sbtck", "workload", "show", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert show.stdout is not None and show.stderr is not None
    assert show.stdout.readline().startswith(b"1500 failed or undecided worlds")
    show.stdout.close()  # as head does once it has its lines
    err = show.stderr.read().decode()
    assert show.wait(timeout=60) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
