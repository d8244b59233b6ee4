"""The HTML report: every catalogue rule has a row, and nothing an implementation says can run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sbtck import catalogue
from sbtck.reports import html, results

EVIL = "<script>alert(1)</script>"


def _record(status: str, **extra: object) -> results.ScenarioRecord:
    return results.ScenarioRecord(
        id="features/activation/01_x.feature::[1] a",
        feature_path="features/activation/01_x.feature",
        feature_name="Activation 01",
        name="[1] a",
        line=3,
        tags=["ACT-02"],
        steps=[results.StepRecord("Given", 'the topology "activation"', 4, "passed")],
        status=status,
        **extra,  # type: ignore[arg-type]
    )


def test_every_rule_has_a_row_and_uncovered_rules_say_so(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [_record("passed")])
    page = html.build([path], tmp_path / "index.html").read_text()
    rows = re.findall(r'<tr id="rule-([A-Z]+-[0-9A-Z]+)"', page)
    assert rows == list(catalogue.load().rules)
    assert page.count("no scenario") == len(rows) - 1


def test_implementation_strings_are_escaped(tmp_path: Path) -> None:
    record = _record(
        "failed",
        failure={"step": EVIL, "line": 4, "kind": "failed", "message": f"expected <b>{EVIL}</b>"},
        events=[{"at_ms": 0, "second": 0, "kind": EVIL, "queue": EVIL}],
    )
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": EVIL, "version": '"><img src=x onerror=alert(1)>'}}, [record])
    page = html.build([path], tmp_path / "index.html").read_text()
    assert EVIL not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the report's own filter script, and no other


def test_sbtck_report_combines_runs_into_a_matrix_with_a_workload(tmp_path: Path) -> None:
    import json

    from sbtck.cli import main

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    results.write(good, {"implementation": {"name": "alpha", "version": "1"}}, [_record("passed")])
    results.write(bad, {"implementation": {"name": "beta", "version": "2"}}, [_record("failed")])
    summary = tmp_path / "workload.json"
    summary.write_text(
        json.dumps(
            {
                "kind": "sbtck-workload-summary",
                "worlds": 100,
                "conversations": 5000,
                "failed_worlds": 1,
                "duration_s": 10,
                "violations": {"ACT-10": 1},
                "capabilities": {"activation, routing": 97, "activation": 3},
                "reproducers": [{"rule": "ACT-10", "seed": 7, "path": "reproducers/seed-7.feature"}],
            }
        )
    )
    assert main(["report", str(good), str(bad), "--out", str(tmp_path / "out"), "--workload", str(summary)]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    matrix = page[page.index('id="matrix"') : page.index('id="workload"')]
    assert "alpha 1" in matrix and "beta 2" in matrix
    assert '<td class="passed">✔ 1 passed</td><td class="failed">✘ 1 failed</td>' in matrix
    assert "100 worlds, 5000 conversations, 1 failing worlds" in page
    assert 'href="reproducers/seed-7.feature"' in page
    assert "<tr><td>activation, routing</td><td>97</td></tr><tr><td>activation</td><td>3</td></tr>" in page
    cucumber = json.loads((tmp_path / "out" / "cucumber.json").read_text())
    assert [e["name"] for f in cucumber for e in f["elements"]] == ["[1] a", "[1] a"]


def test_sbtck_report_refuses_missing_or_wrong_files(tmp_path: Path) -> None:
    from sbtck.cli import main

    assert main(["report", str(tmp_path / "nope.json")]) == 2
    good = tmp_path / "good.json"
    results.write(good, {"implementation": {"name": "alpha"}}, [_record("passed")])
    (tmp_path / "w.json").write_text('{"kind": "something else"}')
    assert main(["report", str(good), "--workload", str(tmp_path / "w.json"), "--out", str(tmp_path / "o")]) == 2


def test_sbtck_report_refuses_one_run_given_twice_and_leaves_no_earlier_reports_junit(tmp_path: Path) -> None:
    from sbtck.cli import main

    first, second = tmp_path / "a.json", tmp_path / "b.json"
    results.write(first, {"implementation": {"name": "alpha"}}, [_record("passed")])
    results.write(second, {"implementation": {"name": "beta"}}, [_record("failed")])
    out = tmp_path / "o"
    assert main(["report", str(first), str(tmp_path / "." / "a.json"), "--out", str(out)]) == 2
    assert not out.exists()
    assert main(["report", str(first), "--out", str(out)]) == 0
    assert (out / "junit.xml").is_file()
    assert main(["report", str(first), str(second), "--out", str(out)]) == 0
    # junit.xml holds one run's test cases: the one left from the first report would be taken for this one's
    assert sorted(path.name for path in out.iterdir()) == [".sbtck-report", "cucumber.json", "index.html"]


def test_sbtck_report_that_cannot_be_written_whole_leaves_the_earlier_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sbtck.cli import main
    from sbtck.reports import cucumber

    written = tmp_path / "a.json"
    results.write(written, {"implementation": {"name": "alpha"}}, [_record("passed")])
    out = tmp_path / "o"
    assert main(["report", str(written), "--out", str(out)]) == 0
    earlier = {path.name: path.read_bytes() for path in out.iterdir()}

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cucumber, "write", full_disk)  # after the page is written: a page alone would be half
    assert main(["report", str(written), "--out", str(out)]) == 2
    assert {path.name: path.read_bytes() for path in out.iterdir()} == earlier


def test_a_workload_with_undecided_worlds_says_how_many_and_a_wrong_count_is_refused(tmp_path: Path) -> None:
    import json

    from sbtck.errors import WorkloadSummaryError
    from sbtck.reports import workload

    summary = {"kind": workload.KIND, "worlds": 10, "conversations": 50, "failed_worlds": 0, "duration_s": 1}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**summary, "undecided_worlds": 2}))
    assert "0 failing worlds and 2 undecided (the search's budget ran out)" in workload.section(workload.load(path))
    path.write_text(json.dumps(summary))  # a summary written before the search: none
    assert "0 failing worlds, in" in workload.section(workload.load(path))
    for wrong in ("2", -1, 1.5, True):
        path.write_text(json.dumps({**summary, "undecided_worlds": wrong}))
        with pytest.raises(WorkloadSummaryError, match="undecided_worlds"):
            workload.load(path)


def test_cucumber_json_is_right_under_xdist_too(tmp_path: Path) -> None:
    import json

    from tests.helpers import sbtck, scenarios_tagged

    run = sbtck("--tags", "ACT-09", "--", "-n", "2", out=tmp_path)
    assert run.code == 0
    features = json.loads((tmp_path / "cucumber.json").read_text())
    names = sorted(e["name"] for f in features for e in f["elements"])
    assert names == sorted(s["name"] for s in run.results()["scenarios"]) and len(names) == scenarios_tagged("ACT-09")
    assert all(step["result"]["status"] == "passed" for f in features for e in f["elements"] for step in e["steps"])


def test_a_status_from_a_results_file_never_leaves_its_class_attribute(tmp_path: Path) -> None:
    """A hand-edited results.json: its statuses reach class names as letters, digits and dashes only."""
    evil = 'x"><svg/onload=alert(1)>'
    record = _record(evil)
    record.steps = [results.StepRecord("Given", 'the topology "activation"', 4, evil)]
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [record])
    page = html.build([path], tmp_path / "index.html").read_text()
    assert "<svg" not in page and 'x"><' not in page
    assert "x---svg-onload-alert-1--" in page
    assert page.count("<script>") == 1


def test_a_reproducer_is_linked_only_by_a_relative_path() -> None:
    from sbtck.reports.workload import _reproducer

    assert _reproducer("reproducers/seed-7.feature") == (
        '<a href="reproducers/seed-7.feature">reproducers/seed-7.feature</a>'
    )
    for hostile in (
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "//evil.example/x",
        "/etc/passwd",
        "data:text/html,x",
    ):
        assert "<a" not in _reproducer(hostile), hostile
