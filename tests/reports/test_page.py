"""The HTML report: every catalogue rule has a row, and nothing an implementation says can run."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sbtck import catalogue
from sbtck.errors import ResultsError
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


def _log_failure(expected: list[list[str]], got: list[list[str]]) -> results.ScenarioRecord:
    table = {"columns": ["second", "event", "task"], "expected": expected, "got": got}
    return _record("failed", failure={"step": "Then x", "line": 4, "kind": "failed", "message": "m", "table": table})


def test_one_extra_reported_row_marks_that_row_alone(tmp_path: Path) -> None:
    """The rows are aligned by a diff: a row the implementation reported beyond the table is marked as not
    expected, and the rows after it, which match, are not marked."""
    expected = [["0", "procedure started", "1"], ["3", "procedure exited", "1"], ["3", "procedure started", "2"]]
    got = [expected[0], ["0", "procedure started", "2"], expected[1], expected[2]]
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [_log_failure(expected, got)])
    page = html.build([path], tmp_path / "index.html").read_text()
    marked = re.findall(r'<tr class="([^"]*)"', page[page.index('class="vs reported"') :])
    assert marked.count("inserted") == 1 and "missing" not in marked and marked.count("same") == 3, marked
    assert "not expected" in page


def test_a_row_the_implementation_did_not_report_is_marked_missing(tmp_path: Path) -> None:
    expected = [["0", "procedure started", "1"], ["3", "procedure exited", "1"], ["3", "procedure started", "2"]]
    got = [expected[0], expected[2]]
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [_log_failure(expected, got)])
    page = html.build([path], tmp_path / "index.html").read_text()
    marked = re.findall(r'<tr class="([^"]*)"', page[page.index('class="vs reported"') :])
    assert marked.count("missing") == 1 and marked.count("same") == 2, marked


def test_the_cause_of_a_differing_log_names_its_first_differing_cell(tmp_path: Path) -> None:
    """Not "the log differs.": the row and the column, what was expected and what came."""
    from tests.helpers import sbtck

    run = sbtck("--iut", "python:tests.variants.activation:ignores_max_queue_readers", "--tags", "ACT-07", out=tmp_path)
    assert run.code == 1
    causes = [
        s["failure"]["message"].splitlines()[0]
        for s in run.results()["scenarios"]
        if s["status"] == "failed" and "table" in s["failure"]
    ]
    shapes = (
        r"the log for queue '\w+' differs: (row \d+, \w+: expected .+, got .+"
        r"|reported row \d+ was not expected \(.+\)|expected row \d+ is missing \(.+\))"
    )
    assert causes and all(re.fullmatch(shapes, cause) for cause in causes), causes
    assert "the log for queue 'StallQueue' differs: row 2, second: expected 2, got 0" in causes, causes
    page = (tmp_path / "index.html").read_text()
    assert "differs." not in page[page.index('id="failures"') : page.index('id="glance"')]


def test_a_failing_view_check_is_a_table_and_the_terminal_says_the_kits_words_first(tmp_path: Path) -> None:
    """A view check says its cause in one line and shows the rows as a table: no Python list of dicts, no copy
    of the whole log, no pytest "Use -v"; the terminal shows that message and no frame of pytest's fixtures."""
    from html import escape

    from tests.helpers import sbtck

    run = sbtck("--iut", "python:tests.variants.activation:ignores_max_queue_readers", "--tags", "ACT-10", out=tmp_path)
    assert run.code == 1
    failed = {s["name"]: s["failure"] for s in run.results()["scenarios"] if s["status"] == "failed"}
    counted = failed["[2] At MAX_QUEUE_READERS no further procedure starts"]
    cause = "expected 3 rows for queue 'StallQueue' in sys.dm_broker_activated_tasks, got 16"
    assert counted["message"].splitlines()[0] == cause
    assert counted["table"]["expected"] is None and len(counted["table"]["got"]) == 16
    # every view check's failure (a log check's message keeps the log after its tables, LOG_FOLLOWS)
    views = [f for f in failed.values() if " in sys." in f["message"].splitlines()[0]]
    assert counted in views
    for failure in views:
        for wrong in ("[{", "Use -v", "\nassert ", "  log:"):
            assert wrong not in failure["message"], failure["message"]
    page = (tmp_path / "index.html").read_text()
    shown = page.index(escape(cause))
    assert page.index('class="vs reported"') > shown and "&#x27;spid&#x27;" not in page
    # the terminal: the kit's message, not pytest's frames of the fixture that ran the step
    assert cause in run.output
    for frame in ("fixturefunc", "def log_shows", "def task_count", "_pytest/fixtures.py", "Use -v"):
        assert frame not in run.output, frame


def _named(status: str, number: int, area: str = "activation") -> results.ScenarioRecord:
    record = _record(status)
    record.id = f"features/{area}/0{number}_x.feature::[{number}] s{number}"
    record.feature_path = f"features/{area}/0{number}_x.feature"
    record.name = f"[{number}] s{number}"
    return record


def test_a_report_of_three_runs_has_a_scenario_matrix_labelled_glances_and_each_runs_failures(tmp_path: Path) -> None:
    """As wpt.fyi shows browsers: a scenario per row, a run per column, an interop figure per area (the
    scenarios every run passes); each run's glance and failures under its label."""
    runs = {
        "alpha": [_named("passed", 1), _named("passed", 2), _named("passed", 3, "routing")],
        "beta": [_named("failed", 1), _named("passed", 2), _named("passed", 3, "routing")],
        "gamma": [_named("passed", 1), _named("error", 2), _named("passed", 3, "routing")],
    }
    paths = []
    for name, records in runs.items():
        paths.append(tmp_path / f"{name}.json")
        results.write(paths[-1], {"implementation": {"name": name, "version": "1"}}, records)
    page = html.build(paths, tmp_path / "index.html").read_text()
    for label in ("alpha 1", "beta 1", "gamma 1"):
        assert f"Rules at a glance: {label}</h" in page
    failures = page[page.index('id="failures"') : page.index('id="glance')]
    assert "beta 1" in failures and "gamma 1" in failures and "[1] s1" in failures and "[2] s2" in failures
    assert failures.index("beta 1") < failures.index("[1] s1") < failures.index("gamma 1") < failures.index("[2] s2")
    grid = page[page.index('id="scenario-matrix"') :]
    grid = grid[: grid.index("</table>")]
    assert grid.count('<tr class="scenario-row"') == 3
    row = grid[grid.index("[1] s1") :]
    row = row[: row.index("</tr>")]
    assert [m for m in re.findall(r'class="s (\w[\w-]*)"', row)] == ["passed", "failed", "passed"]
    interop = page[page.index('id="interop"') :]
    interop = interop[: interop.index("</table>")]
    every = interop[interop.index("every run</th>") :]
    assert re.match(r"every run</th><td><b>0 of 2 \(0%\)</b></td><td><b>1 of 1 \(100%\)</b></td></tr>", every)
    # a failure of a later run links to that run's scenario, which the page holds
    target = re.search(r'href="#(r2-sc-[^"]+)"', failures)
    assert target and f'id="{target.group(1)}"' in page


def test_the_page_comes_from_package_templates_escaped_and_with_hidden_characters_shown(tmp_path: Path) -> None:
    """The page's frame is a jinja2 template with autoescape, its CSS and script package files inlined whole; an
    implementation's name in it is escaped and its bidi and control characters show as [U+202E]."""
    from importlib.resources import files

    kit_files = files("sbtck.reports")
    css = (kit_files / "static" / "report.css").read_text()
    script = (kit_files / "static" / "report.js").read_text()
    assert (kit_files / "templates" / "page.html.j2").is_file()
    name = "<b>evil</b>\u202egnp.exe\x07"
    runs = []
    for n in range(2):
        path = tmp_path / f"r{n}.json"
        results.write(path, {"implementation": {"name": f"{name}{n}", "version": "1"}}, [_record("failed")])
        runs.append(path)
    page = html.build(runs, tmp_path / "index.html").read_text()
    assert f"<style>{css}</style>" in page and f"<script>{script}</script>" in page
    assert "\u202e" not in page and "\x07" not in page and "<b>evil" not in page
    assert "&lt;b&gt;evil&lt;/b&gt;[U+202E]gnp.exe[U+0007]0" in page
    assert page.count("<script>") == 1


def test_the_sequence_picture_marks_the_failing_message_and_keeps_labels_off_its_arrows(tmp_path: Path) -> None:
    def event(kind: str, instance: str, number: int, second: float = 0) -> dict[str, object]:
        return {
            "at_ms": 0,
            "second": second,
            "kind": kind,
            "instance": instance,
            "dialog": "D1",
            "message_sequence_number": number,
            "from_target": False,
        }

    events = [
        event("message_sent", "sql1", 0),
        event("message_transmitted", "sql1", 0),
        event("message_arrived", "sql2", 0),
        event("message_sent", "sql1", 1, 10),
        event("message_arrived", "sql1", 1, 10),
    ]
    columns = ["event", "instance", "message_sequence_number"]
    table = {
        "columns": columns,
        "expected": [["message arrived", "sql2", "0"], ["message arrived", "sql2", "1"]],
        "got": [["message arrived", "sql2", "0"], ["message arrived", "sql1", "1"]],
    }
    failure = {
        "step": 'Then the log for dialog "D1" shows exactly:',
        "line": 4,
        "kind": "failed",
        "message": "m",
        "table": table,
    }
    record = _record("failed", failure=failure, events=events)
    record.feature_path, record.id = "features/routing/01_x.feature", "features/routing/01_x.feature::[1] a"
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [record])
    page = html.build([path], tmp_path / "index.html").read_text()
    picture = page[page.index('<svg class="sequence"') :]
    picture = picture[: picture.index("</svg>")]
    assert picture.count('class="failing"') == 2  # D1:1 sent and arrived, not D1:0
    assert "✘ D1:1 arrived" in picture and "✘ D1:0" not in picture
    arrows = re.findall(r'<line x1="[\d.]+" y1="([\d.]+)" x2="[\d.]+" y2="([\d.]+)"[^>]*marker-end', picture)
    labels = [
        float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" font-size="10" text-anchor="middle"', picture)
    ]
    assert arrows and all(a == b for a, b in arrows)  # level
    assert all(label < float(y) - 3 for (y, _), label in zip(arrows, labels, strict=True))  # above, not on it


@pytest.mark.parametrize("wrong", [7, "ab", [7, "x"], None, {"a": 1}])
def test_a_hand_edited_failure_table_of_any_shape_is_refused_naming_the_field(tmp_path: Path, wrong: object) -> None:
    """Never a crash of the page builder: a table of a shape results.json does not declare is one line naming it."""
    table = {"columns": wrong, "expected": [["1"]], "got": [["2"]]}
    record = _record("failed", failure={"step": "Then x", "line": 4, "kind": "failed", "message": "m", "table": table})
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [record])
    with pytest.raises(ResultsError, match=r"\$\.scenarios\[0\]\.failure\.table\.columns"):
        html.build([path], tmp_path / "index.html")


def test_a_count_check_table_names_no_expected_rows_and_makes_a_page(tmp_path: Path) -> None:
    table = {"columns": ["task"], "expected": None, "got": [["1"], ["2"]]}
    record = _record("failed", failure={"step": "Then x", "line": 4, "kind": "failed", "message": "m", "table": table})
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": "x"}}, [record])
    assert "Then x" in html.build([path], tmp_path / "index.html").read_text()


def test_the_rules_table_of_three_runs_gives_each_runs_status_under_its_label(tmp_path: Path) -> None:
    """F5: the "Rules" table of a page of several runs said the first run's statuses only, unlabelled."""
    paths = []
    for name, status in (("alpha", "passed"), ("beta", "failed"), ("gamma", "passed")):
        paths.append(tmp_path / f"{name}.json")
        results.write(paths[-1], {"implementation": {"name": name, "version": "1"}}, [_named(status, 1)])
    page = html.build(paths, tmp_path / "index.html").read_text()
    row = page[page.index('<tr id="rule-ACT-02"') :]
    row = row[: row.index("</tr>")]
    shown = re.findall(r'<div class="by-run"><b>(\w+) 1:</b> (?:<a href="#([^"]+)">)?<span class="s (\w+)"', row)
    assert [(label, status) for label, _, status in shown] == [
        ("alpha", "passed"),
        ("beta", "failed"),
        ("gamma", "passed"),
    ]
    # each links to its run's scenario where the page holds it: the first run's all, a later run's failures
    links = [link for _, link, _ in shown]
    assert links[0].startswith("sc-") and links[1].startswith("r2-sc-") and links[2] == ""
    assert f'id="{links[1]}"' in page
    uncovered = page[page.index('<tr id="rule-ACT-01"') :]
    assert uncovered[: uncovered.index("</tr>")].count("no scenario") == 3


HOSTILE = "<script>x</script><xss>\"'\u200b"
SHOWN = "<script>x</script><xss>\"'[U+200B]"  # as the reader sees it: the zero-width space made visible


class _Reader(HTMLParser):
    """The page as a browser reads it: its tags, and each text and attribute value (entities resolved) with the
    innermost open element, as (tag, attribute or "#text", value)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.values: list[tuple[str, str, str]] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.values.extend((tag, name, value or "") for name, value in attrs)
        if tag not in ("br", "wbr", "input", "path", "line", "circle", "rect", "meta"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.values.append((self.open[-1] if self.open else "", "#text", data))


def test_a_hostile_text_is_escaped_and_its_hidden_characters_shown_in_every_part_of_the_page(tmp_path: Path) -> None:
    """A script, a tag, quotes and a zero-width space in a run's label, a scenario's name, a step and a reported
    field: never markup, and shown as [U+200B] wherever the page shows it."""

    def event(kind: str, instance: str, second: float) -> dict[str, object]:
        # an instance and a queue are what the implementation reported
        return {"at_ms": 0, "second": second, "kind": kind, "instance": instance, "queue": HOSTILE, "dialog": "D1"}

    hostile = _named("failed", 1)
    hostile.name, hostile.steps[0].text = f"[1] {HOSTILE}", HOSTILE
    table = {"columns": ["event", "instance"], "expected": [["message arrived", "sql2"]], "got": [["x", HOSTILE]]}
    hostile.failure = {"step": "Then x", "line": 4, "kind": "failed", "message": "m", "table": table}
    hostile.events = [
        {**event("message_sent", "sql1", 0), "message_sequence_number": 0, "from_target": False},
        {**event("message_arrived", HOSTILE, 1), "message_sequence_number": 0, "from_target": False},
    ]
    paths: list[Path] = []
    for name, records in (("alpha", [_named("passed", 1)]), (HOSTILE, [hostile])):
        paths.append(tmp_path / f"{len(paths)}.json")
        results.write(paths[-1], {"implementation": {"name": name, "version": "1"}}, records)
    page = html.build(paths, tmp_path / "index.html").read_text()
    reader = _Reader()
    reader.feed(page)
    assert reader.tags.count("script") == 1 and "xss" not in reader.tags  # the page's own script, no other
    assert "\u200b" not in page
    parts = {  # each part of the page that shows the run's label, the scenario's name, the step or the field
        "verdict": ('class="verdict v-does-not-conform"', "</section>"),
        "what did not pass": ('id="failures"', "</section>"),
        "interoperability": ('id="interop"', "</table>"),
        "rules at a glance": ('id="glance-2"', "</h2>"),
        "run summary": ("</details><h2>", "</p>"),
        "rules by run": ('id="matrix"', "</tr>"),
        "scenarios by run": ('id="scenario-matrix"', "</table>"),
        "rules": ('<tr id="rule-ACT-02"', "</tr>"),
        "later run's failures": ("What did not pass in", "</h3>"),
        "scenario card": ('id="r2-sc-', "</p>"),
        "step": ('id="r2-sc-', "</div>"),
        "reported table": ('class="vs reported"', "</table>"),
        "sequence picture": ('<svg class="sequence"', "</svg>"),
        "sequence picture's label": ('class="wide sequence-region"', ">"),
        "event log": ("<details><summary>Event log", "</details>"),
    }
    for part, (start, end) in parts.items():
        fragment = page[page.index(start) :]
        fragment = fragment[: fragment.index(end) + len(end)]
        read = _Reader()
        read.feed(fragment)
        assert any(SHOWN in value for _, _, value in read.values), (part, fragment[:500])
    timeline = page[page.index('<svg class="timeline"') :]
    read = _Reader()
    read.feed(timeline[: timeline.index("</svg>")])
    assert ("text", "#text", "queue depth: <script>x</sc") in read.values  # a track's name, cut at 26 characters
