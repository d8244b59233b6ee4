"""One truth in every output: a run with all seven statuses, read by the tools CI systems use.

results.json, index.html, junit.xml (read by junitparser, validated against
pytest's own JUnit schema) and cucumber.json must give the same counts
under the mapping documented in sbtck/reports/junit.py, sbtck/reports/cucumber.py and
the README, and the exit status must agree with the verdict.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from sbtck.reports import baseline, results
from sbtck.reports import summary as summary_module
from tests.helpers import ROOT, Run, kit, sbtck, scenarios_tagged

MIXED = "python:tests.fakes.mixed:mixed"


def _profile(folder: Path) -> Path:
    """The reference's profile without mirroring: the mirror scenarios are not applicable."""
    data = yaml.safe_load((ROOT / "engine" / "profile.yaml").read_text())
    data["capabilities"].remove("mirroring")
    data["implementation"]["name"] = "mixed fortunes"
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# the module's tests share its runs (a mixed run: most of a minute): on one worker, made once
pytestmark = pytest.mark.xdist_group("outputs")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("mixed")
    profile = _profile(folder)
    first = sbtck("--iut", MIXED, "--profile", str(profile), out=folder / "first").statuses()
    # one error listed as expected (an expected failure), one pass listed as expected (an unexpected pass)
    listed = [
        next(i for i, s in first.items() if s == results.ERROR),
        next(i for i, s in first.items() if s == results.PASSED),
    ]
    (folder / "expected.yaml").write_text(yaml.safe_dump({"expected_failures": listed}))
    return sbtck(
        "--iut", MIXED, "--profile", str(profile), "--expectations", str(folder / "expected.yaml"), out=folder / "run"
    )


def _statuses(run: Run) -> Counter[str]:
    return Counter(run.statuses().values())


def test_the_mixed_run_has_every_status(mixed: Run) -> None:
    counts = _statuses(mixed)
    assert set(counts) == set(results.STATUSES), counts


def test_the_exit_status_agrees_with_the_verdict(mixed: Run) -> None:
    statuses = list(mixed.statuses().values())
    verdict = results.verdict(mixed.results(), statuses)
    assert verdict == results.DOES_NOT_CONFORM
    assert mixed.code == results.VERDICT_EXIT[verdict] == 1


def test_the_page_counts_what_results_json_counts(mixed: Run) -> None:
    page = (mixed.out / "index.html").read_text()
    shown = {m[0]: int(m[1]) for m in re.findall(r'data-status="([a-z ]+)" data-count="(\d+)"', page)}
    assert shown == {s: _statuses(mixed).get(s, 0) for s in results.STATUSES}
    assert 'data-verdict="does not conform"' in page


def test_junit_counts_under_the_documented_mapping(mixed: Run) -> None:
    from junitparser import Error, Failure, JUnitXml, Skipped

    counts = _statuses(mixed)
    xml = JUnitXml.fromfile(str(mixed.out / "junit.xml"))
    suites = list(xml)
    assert sum(s.tests for s in suites) == sum(counts.values())
    assert sum(s.failures for s in suites) == counts[results.FAILED] + counts[results.UNEXPECTED_PASS]
    assert sum(s.errors for s in suites) == counts[results.ERROR]
    assert (
        sum(s.skipped for s in suites)
        == counts[results.NOT_APPLICABLE] + counts[results.EXPECTED_FAILURE] + counts[results.DIFFERS]
    )
    kinds: Counter[str] = Counter()
    for suite in suites:
        assert suite.name and not suite.name.startswith("pytest")
        for case in suite:
            assert case.classname.startswith("features.") and case.name.startswith("[")
            for result in case.result:
                kinds[f"{type(result).__name__}:{result.type}"] += 1
                assert isinstance(result, (Failure, Error, Skipped))
                assert "_pytest" not in (result.text or "") and "FixtureRequest" not in (result.text or "")
    assert kinds == Counter(
        {
            f"Failure:{results.FAILED}": counts[results.FAILED],
            f"Failure:{results.UNEXPECTED_PASS}": counts[results.UNEXPECTED_PASS],
            f"Error:{results.ERROR}": counts[results.ERROR],
            f"Skipped:{results.NOT_APPLICABLE}": counts[results.NOT_APPLICABLE],
            f"Skipped:{results.EXPECTED_FAILURE}": counts[results.EXPECTED_FAILURE],
            f"Skipped:{results.DIFFERS}": counts[results.DIFFERS],
        }
    )


# the Node.js JUnit readers, installed by scripts/setup.sh where npm is
READERS = ROOT / ".venv" / "junit-readers" / "node_modules"


def test_junit_readers_give_the_totals_of_results_json(mixed: Run) -> None:
    """test-results-parser takes the root's totals when they are there (and counted a skipped case as passed when
    the root carried no ``skipped``); junitparser and xunit-viewer sum the cases. Each agrees with results.json."""
    from junitparser import JUnitXml

    if not (READERS / "test-results-parser").is_dir() or not (READERS / "xunit-viewer").is_dir():
        message = f"no JUnit readers in {READERS}: bash scripts/setup.sh installs them (it needs npm)"
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the JUnit readers, but there are {message}")
        pytest.skip(message)
    counts = _statuses(mixed)
    want = {
        "passed": counts[results.PASSED],
        "failed": counts[results.FAILED] + counts[results.UNEXPECTED_PASS],
        "errors": counts[results.ERROR],
        "skipped": counts[results.NOT_APPLICABLE] + counts[results.EXPECTED_FAILURE] + counts[results.DIFFERS],
    }
    assert all(want.values())
    junit = mixed.out / "junit.xml"
    read = subprocess.run(
        ["node", str(Path(__file__).with_name("junit_readers.mjs")), str(READERS), str(junit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    got = json.loads(read.stdout)
    parsed = got["test-results-parser"]
    # its total leaves the skipped cases out
    assert parsed == {**want, "total": sum(want.values()) - want["skipped"]}
    viewed = got["xunit-viewer"]
    assert viewed == {k: v for k, v in zip(("passed", "failure", "error", "skipped"), want.values(), strict=True)}
    suites = list(JUnitXml.fromfile(str(junit)))
    assert {
        "passed": sum(s.tests - s.failures - s.errors - s.skipped for s in suites),
        "failed": sum(s.failures for s in suites),
        "errors": sum(s.errors for s in suites),
        "skipped": sum(s.skipped for s in suites),
    } == want


def _worst(element: dict[str, Any]) -> str:
    """How Cucumber readers sum a scenario up: failed over pending over skipped over passed."""
    statuses = [s["result"]["status"] for s in element["steps"]] + [
        h["result"]["status"] for h in element.get("after", [])
    ]
    for status in ("failed", "pending", "skipped"):
        if status in statuses:
            return status
    return "passed"


def test_cucumber_counts_under_the_documented_mapping(mixed: Run) -> None:
    counts = _statuses(mixed)
    features = json.loads((mixed.out / "cucumber.json").read_text())
    summed = Counter(_worst(e) for f in features for e in f["elements"])
    assert summed == Counter(
        {
            "passed": counts[results.PASSED],
            "failed": counts[results.FAILED] + counts[results.ERROR] + counts[results.UNEXPECTED_PASS],
            "skipped": counts[results.NOT_APPLICABLE] + counts[results.DIFFERS],
            "pending": counts[results.EXPECTED_FAILURE],
        }
    )


def test_cucumber_keeps_durations_tables_docstrings_tags_and_ids(mixed: Run) -> None:
    features = {f["uri"]: f for f in json.loads((mixed.out / "cucumber.json").read_text())}
    locating = features["features/routing/04_locating.feature"]
    assert {t["name"] for t in locating["tags"]} == {"@requires-routing"}
    steps = [s for f in features.values() for e in f["elements"] for s in e["steps"]]
    assert any(s["result"]["duration"] > 0 for s in steps)
    tables = [s for s in steps if "rows" in s]
    assert tables and all(isinstance(row["cells"], list) for s in tables for row in s["rows"])
    for feature in features.values():
        for element in feature["elements"]:
            assert element["id"].startswith(feature["id"] + ";")
            assert not {t["name"] for t in element["tags"]} & {t["name"] for t in feature["tags"]}


def test_cucumber_carries_a_docstring() -> None:
    from sbtck.reports import cucumber

    step = results.StepRecord(
        "Given", "the topology:", 7, "passed", docstring="instances:\n  sql1: {}", duration_s=0.25
    )
    record = results.ScenarioRecord("f.feature::[1] x", "f.feature", "F", "[1] x", 6, ["a"], [step], results.PASSED)
    (feature,) = cucumber.render([record])
    (out,) = feature["elements"][0]["steps"]
    assert out["doc_string"] == {"value": "instances:\n  sql1: {}", "content_type": "", "line": 8}
    assert out["result"] == {"status": "passed", "duration": 250_000_000}


@pytest.fixture(scope="module")
def pytest_junit_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest's JUnit schema (testing/example_scripts/junit-10.xsd), from the sdist of the installed pytest."""
    folder = tmp_path_factory.mktemp("pytest-sdist")
    version = pytest.__version__
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary=:all:", "-d", str(folder)]
    got = subprocess.run(
        [*pip, f"pytest=={version}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    sdists = list(folder.glob("pytest-*.tar.gz"))
    if got.returncode != 0 or not sdists:
        pytest.fail(f"could not fetch pytest {version}'s sdist from the package index: {got.stderr[-500:]}")
    name = f"pytest-{version}/testing/example_scripts/junit-10.xsd"
    with tarfile.open(sdists[0]) as sdist:
        sdist.extract(name, folder, filter="data")
    return folder / name


def test_junit_is_valid_against_pytests_schema(mixed: Run, pytest_junit_schema: Path) -> None:
    import xmlschema

    xmlschema.XMLSchema(str(pytest_junit_schema)).validate(str(mixed.out / "junit.xml"))


def test_the_rerun_command_keeps_the_runs_settings_and_reruns_with_the_same_status(mixed: Run, tmp_path: Path) -> None:
    expected = next(s for s in mixed.results()["scenarios"] if s["status"] == results.EXPECTED_FAILURE)
    command = expected["rerun"]
    for option in ("--iut", "--profile", "--expectations", "--out"):
        assert option in command
    words = shlex.split(command)
    assert words[:2] == ["sbtck", "run"]
    argv = words[2:]
    proc = kit("run", *argv)
    out = Path(argv[argv.index("--out") + 1])
    rerun = json.loads((out / "results.json").read_text())["scenarios"]
    assert [(s["id"], s["status"]) for s in rerun] == [(expected["id"], results.EXPECTED_FAILURE)], proc.stdout[-2000:]
    assert out != mixed.out and (mixed.out / "results.json").is_file()


def test_a_baseline_puts_regressions_first_and_fails_the_run(mixed: Run, tmp_path: Path) -> None:
    reference = sbtck(out=tmp_path / "reference")
    assert reference.code == 0
    # the reference as the baseline: every scenario the mixed implementation breaks is a regression
    against = sbtck("--iut", MIXED, "--baseline", str(reference.out / "results.json"), out=tmp_path / "b")
    changes = baseline.compare(
        results.read(reference.out / "results.json")[1], results.read(against.out / "results.json")[1]
    )
    assert changes.regressions and against.code == 1
    assert f"{len(changes.regressions)} regression" in against.output
    page = (against.out / "index.html").read_text()
    assert page.index('id="changes"') < page.index('id="glance"') < page.index('id="specification"')
    assert page.index('id="changes"') < page.index("<h3>Regressions</h3>") < page.index('id="glance"')

    # the other way round: fixes only, and a report of them that exits 0
    def report(now: Run, old: Run, out: str) -> subprocess.CompletedProcess[str]:
        return kit("report", str(now.out / "results.json"), "--baseline", str(old.out / "results.json"), "--out", out)

    fixes = report(reference, against, str(tmp_path / "fixes"))
    assert fixes.returncode == 0, fixes.stderr
    assert "0 regressions" in fixes.stdout and f"{len(changes.regressions)} fix" in fixes.stdout
    worse = report(against, reference, str(tmp_path / "worse"))
    assert worse.returncode == 1 and "regression: " in worse.stdout


def test_changes_are_listed_regressions_then_fixes_then_the_rest() -> None:
    from sbtck.reports import html

    def record(n: int, status: str) -> results.ScenarioRecord:
        return results.ScenarioRecord(f"f.feature::[{n}] s", "f.feature", "F", f"[{n}] s", n, [], [], status)

    before = [record(1, results.PASSED), record(2, results.FAILED), record(3, results.PASSED), record(4, results.ERROR)]
    after = [
        record(1, results.NOT_APPLICABLE),
        record(2, results.PASSED),
        record(3, results.ERROR),
        record(5, results.PASSED),
    ]
    changed = baseline.compare(before, after)
    assert [c.id for c in changed.regressions] == ["f.feature::[3] s"]
    assert [c.id for c in changed.fixes] == ["f.feature::[2] s"]
    assert [c.id for c in changed.changed] == ["f.feature::[1] s", "f.feature::[4] s", "f.feature::[5] s"]
    page = html.changes(changed, after, "old/results.json")
    assert page.index("[3] s") < page.index("[2] s") < page.index("[1] s")
    assert page.index("Regressions") < page.index("Fixes") < page.index("Other changes")


def test_expectations_from_a_run_make_the_next_run_conform(mixed: Run, tmp_path: Path) -> None:
    made = kit("expectations", "--from", str(mixed.out / "results.json"))
    assert made.returncode == 0, made.stderr
    listed = yaml.safe_load(made.stdout)["expected_failures"]
    broken = {i for i, s in mixed.statuses().items() if s in (results.FAILED, results.ERROR, results.EXPECTED_FAILURE)}
    assert set(listed) == broken
    (tmp_path / "known.yaml").write_text(made.stdout)
    profile = _profile(tmp_path)
    again = sbtck(
        "--iut", MIXED, "--profile", str(profile), "--expectations", str(tmp_path / "known.yaml"), out=tmp_path / "o"
    )
    assert again.code == 0, again.output[-2000:]
    # the informative difference stays: it was never held against the implementation
    assert set(_statuses(again)) == {results.PASSED, results.NOT_APPLICABLE, results.EXPECTED_FAILURE, results.DIFFERS}
    bad = kit("expectations", "--from", str(tmp_path / "nothing.json"))
    assert bad.returncode == 2 and "nothing.json" in bad.stderr and "Traceback" not in bad.stderr


def test_nothing_ran_is_said_and_is_not_success(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "engine" / "profile.yaml").read_text())
    data["capabilities"] = []
    (tmp_path / "none.yaml").write_text(yaml.safe_dump(data))
    run = sbtck("--profile", str(tmp_path / "none.yaml"), "--tags", "ACT-13", out=tmp_path / "o")
    assert run.code == results.VERDICT_EXIT[results.NOTHING_RAN] == 2
    assert 'data-verdict="nothing ran"' in (run.out / "index.html").read_text()
    # one account of it: scenarios matched the tags, and none applied, which is not "no scenario matches"
    tagged = scenarios_tagged("ACT-13")
    said = rf"sbtck: nothing ran on {tagged} of \d+ scenarios, selected by --tags 'ACT-13': {tagged} not applicable"
    assert re.search(said, run.output)
    assert "no scenario matches" not in run.output


def test_the_workload_spells_statuses_as_the_suite_does() -> None:
    from sbtck.contract import Handshake
    from sbtck.workloads.stage import Checker

    class _Nothing:
        def handshake(self) -> Handshake:
            return Handshake(name="nothing", version="0", capabilities=(), params={})

        def close(self) -> None:
            pass

    outcome = Checker(_Nothing, differential=False).check(0)  # type: ignore[arg-type]
    assert outcome.outcome == results.NOT_APPLICABLE == "not applicable"


def test_every_output_says_which_checks_were_left_out(tmp_path: Path) -> None:
    """A black box (no decision_trace): its left-out checks pass in every output, and every output says so."""
    run = sbtck("--iut", "python:tests.fakes.partial:black_box", out=tmp_path)
    assert run.code == 0, run.output[-2000:]
    records = [results.ScenarioRecord.from_json(s) for s in run.results()["scenarios"]]
    left = next(rec for rec in records if rec.checks[results.LEFT_OUT])
    step = next(s for s in left.steps if s.status == results.LEFT_OUT)
    assert "does not declare decision_trace" in step.left_out
    page = (tmp_path / "index.html").read_text()
    assert page.count("not checked: ") == sum(1 for rec in records for s in rec.steps if s.left_out)
    left_out = sum(rec.checks[results.LEFT_OUT] for rec in records)
    assert f"{left_out} checks left out and " in page and "without decision_trace" in page
    junit = (tmp_path / "junit.xml").read_text()
    assert f"line {step.line} not checked: " in junit and "checks: " in junit
    features = json.loads((tmp_path / "cucumber.json").read_text())
    assert Counter(_worst(e) for f in features for e in f["elements"]) == Counter({"passed": len(records)})
    said = [s for f in features for e in f["elements"] for s in e["steps"] if s.get("output")]
    assert len(said) == sum(1 for rec in records for s in rec.steps if s.left_out)
    assert all(s["output"][0].startswith("not checked: ") for s in said)


def test_under_xdist_the_results_keep_the_features_order_and_the_terminal_the_statuses(tmp_path: Path) -> None:
    run = sbtck("--iut", MIXED, "--tags", "ACT-05 or RTE-04 or PER-5B", "--", "-n", "2", out=tmp_path)
    scenarios = run.results()["scenarios"]
    places = [(s["feature_path"], s["line"]) for s in scenarios]
    assert len(places) > 10 and places == sorted(places)
    # the controller, which binds no scenario itself, still says of how many the selection is
    files = (ROOT / "features").rglob("*.feature")
    total = sum(line.lstrip().startswith("Scenario:") for f in files for line in f.read_text().splitlines())
    selection = f"on {len(scenarios)} of {total} scenarios, selected by --tags "
    (line,) = [line for line in run.output.splitlines() if line.startswith(f"sbtck: does not conform {selection}")]
    said = [part.split(" ", 1)[1] for part in line.split("; report: ")[0].rsplit(": ", 1)[1].split(", ")]
    assert said == [s for s in results.STATUSES if s in said] and len(said) >= 2


OUTLINE = ROOT / "tests" / "fakes" / "features" / "outline.feature"


@pytest.fixture(scope="module")
def outline(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A user's Scenario Outline whose FIRST example fails, the other two pass (tests/fakes/features)."""
    return sbtck("--features", str(OUTLINE), out=tmp_path_factory.mktemp("outline") / "run")


def test_each_example_of_an_outline_is_its_own_record_in_results_json_and_the_terminal(outline: Run) -> None:
    scenarios = outline.results()["scenarios"]
    assert [(s["name"], s["status"]) for s in scenarios] == [
        ("[1] Orders are taken by 3 procedures (example 1: readers=3)", results.FAILED),
        ("[1] Orders are taken by 2 procedures (example 2: readers=2)", results.PASSED),
        ("[1] Orders are taken by 2 procedures (example 3: readers=2)", results.PASSED),
    ]
    assert len({s["id"] for s in scenarios}) == 3 and not any(s["flaky"] for s in scenarios)
    assert [s["example"] for s in scenarios] == [
        {"index": 1, "values": {"readers": "3"}},
        {"index": 2, "values": {"readers": "2"}},
        {"index": 3, "values": {"readers": "2"}},
    ]
    # each example at its row of the Examples table, as Cucumber places it
    rows = [n for n, line in enumerate(OUTLINE.read_text().splitlines(), 1) if re.match(r"\s*\| [23] ", line)]
    assert [s["line"] for s in scenarios] == rows
    assert outline.code == 1
    assert "sbtck: does not conform: 2 passed, 1 failed;" in outline.output
    assert 'data-verdict="does not conform"' in (outline.out / "index.html").read_text()


def test_junit_and_cucumber_readers_count_each_example_as_results_json_does(outline: Run) -> None:
    from junitparser import Failure, JUnitXml

    want = Counter(s["status"] for s in outline.results()["scenarios"])
    assert want == Counter({results.PASSED: 2, results.FAILED: 1})
    cases = [case for suite in JUnitXml.fromfile(str(outline.out / "junit.xml")) for case in suite]
    assert len(cases) == 3
    failed = [case.name for case in cases if any(isinstance(r, Failure) for r in case.result)]
    assert failed == ["[1] Orders are taken by 3 procedures (example 1: readers=3)"]
    features = json.loads((outline.out / "cucumber.json").read_text())
    elements = [e for f in features for e in f["elements"]]
    assert Counter(_worst(e) for e in elements) == Counter({"passed": 2, "failed": 1})
    assert {e["keyword"] for e in elements} == {"Scenario Outline"} and len({e["id"] for e in elements}) == 3
    if (READERS / "test-results-parser").is_dir():  # the Node.js readers, where scripts/setup.sh installed them
        read = subprocess.run(
            ["node", str(Path(__file__).with_name("junit_readers.mjs")), str(READERS), str(outline.out / "junit.xml")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        got = json.loads(read.stdout)
        assert got["test-results-parser"] == {"total": 3, "passed": 2, "failed": 1, "errors": 0, "skipped": 0}
        assert got["xunit-viewer"] == {"passed": 2, "failure": 1}


def test_changes_against_a_baseline_are_listed_in_the_features_order_1_before_10() -> None:
    def record(n: int, status: str) -> results.ScenarioRecord:
        return results.ScenarioRecord(f"f.feature::[{n}] s", "f.feature", "F", f"[{n}] s", n * 5, [], [], status)

    before = [record(n, results.PASSED) for n in (1, 2, 10, 11)]
    after = [record(n, results.FAILED) for n in (1, 2, 10, 11)]
    assert [c.id for c in baseline.compare(before, after).regressions] == [
        "f.feature::[1] s",
        "f.feature::[2] s",
        "f.feature::[10] s",
        "f.feature::[11] s",
    ]


def test_a_markdown_summary_beside_the_report_and_on_the_ci_job_page(mixed: Run, tmp_path: Path) -> None:
    """summary.md counts what results.json counts and lists what did not pass with its rerun command; under
    GitHub Actions ($GITHUB_STEP_SUMMARY) it is appended to the job's page, never replacing what is there."""
    scenarios = mixed.results()["scenarios"]
    summary = (mixed.out / "summary.md").read_text()
    assert summary.startswith("## ✘ mixed fortunes 0.1.0: does not conform\n")
    for status, count in _statuses(mixed).items():
        assert f"| {results.ICONS[status]} {status} | {count} |" in summary
    against = [s for s in scenarios if s["status"] in results.AGAINST]
    listed = against[: summary_module.MOST]
    assert listed and all(s["id"] in summary and s["rerun"] in summary for s in listed)
    if len(against) > summary_module.MOST:  # the rest counted, not listed: the page has them
        assert f"- and {len(against) - summary_module.MOST} more: see the report" in summary
    page = tmp_path / "step-summary.md"
    page.write_text("an earlier step's summary\n")
    proc = kit("run", "--tags", "ACT-09", "--out", str(tmp_path / "o"), env={"GITHUB_STEP_SUMMARY": str(page)})
    assert proc.returncode == 0, proc.stdout[-2000:]
    written = page.read_text()
    assert written.startswith("an earlier step's summary\n")
    assert written.endswith((tmp_path / "o" / "summary.md").read_text())
    assert f"conforms on {scenarios_tagged('ACT-09')} of " in written


def _read_messages(path: Path) -> list[Any]:
    """The envelopes of a Cucumber Messages file, each read into its declared type by cucumber-messages' reader."""
    from cucumber_messages import Envelope, message_converter  # type: ignore[import-untyped]

    envelopes = [message_converter.from_dict(json.loads(line), Envelope) for line in path.read_text().splitlines()]
    for envelope in envelopes:  # one message each
        assert sum(value is not None for value in vars(envelope).values()) == 1, envelope
    return envelopes


def _message_statuses(envelopes: list[Any]) -> dict[str, str]:
    """Each pickle's name with its test case's worst step result, as a Cucumber reader sums it up."""
    rank = ["FAILED", "PENDING", "UNDEFINED", "SKIPPED", "PASSED"]
    pickles = {e.pickle.id: e.pickle for e in envelopes if e.pickle}
    cases = {e.test_case.id: e.test_case for e in envelopes if e.test_case}
    started = {e.test_case_started.id: e.test_case_started.test_case_id for e in envelopes if e.test_case_started}
    definitions = {e.step_definition.id for e in envelopes if e.step_definition}
    for case in cases.values():  # every reference names what the file declares
        steps = {s.id for s in pickles[case.pickle_id].steps}
        assert all(s.pickle_step_id in steps for s in case.test_steps if s.pickle_step_id)
        assert all(set(s.step_definition_ids or []) <= definitions for s in case.test_steps)
    worst: dict[str, str] = {}
    for e in envelopes:
        if e.test_step_finished:
            case = cases[started[e.test_step_finished.test_case_started_id]]
            status = e.test_step_finished.test_step_result.status.value
            now = worst.get(case.id, "PASSED")
            worst[case.id] = min(now, status, key=rank.index)
    assert [e for e in envelopes if e.test_run_finished]
    return {f"{pickles[c.pickle_id].uri}:{pickles[c.pickle_id].location.line}": worst[c.id] for c in cases.values()}


def test_cucumber_messages_read_by_cucumbers_reader_agree_with_results_json(outline: Run, mixed: Run) -> None:
    outline_read = _message_statuses(_read_messages(outline.out / "cucumber.ndjson"))
    assert sorted(outline_read.values()) == ["FAILED", "PASSED", "PASSED"]
    first = outline.results()["scenarios"][0]
    assert outline_read[f"{first['feature_path']}:{first['line']}"] == "FAILED"
    read = _message_statuses(_read_messages(mixed.out / "cucumber.ndjson"))
    counts = _statuses(mixed)
    assert Counter(read.values()) == Counter(
        {
            "PASSED": counts[results.PASSED],
            "FAILED": counts[results.FAILED] + counts[results.ERROR] + counts[results.UNEXPECTED_PASS],
            "SKIPPED": counts[results.NOT_APPLICABLE] + counts[results.DIFFERS],
            "PENDING": counts[results.EXPECTED_FAILURE],
        }
    )
    assert set(read) == {f"{s['feature_path']}:{s['line']}" for s in mixed.results()["scenarios"]}


def test_a_failed_scenario_carries_the_end_of_the_implementations_stderr_in_every_output(
    tmp_path: Path, pytest_junit_schema: Path
) -> None:
    """Not only an erred one: a wrong answer is as much a reason to read what the implementation said."""
    import xmlschema
    from junitparser import JUnitXml

    wrong = f"{sys.executable} -m sbtck.cli serve --stdio --iut python:tests.variants.routing:pinning_ignored"
    spec = f"cmd:sh -c 'echo routing-said-this-on-stderr >&2; exec {wrong}'"
    run = sbtck("--iut", spec, "--tags", "RTE-04", out=tmp_path)
    failed = [s for s in run.results()["scenarios"] if s["status"] == results.FAILED]
    assert failed and all("routing-said-this-on-stderr" in s["failure"]["stderr"] for s in failed), run.output[-2000:]
    cases = [c for suite in JUnitXml.fromfile(str(tmp_path / "junit.xml")) for c in suite if c.system_err]
    assert len(cases) == len(failed) and all("routing-said-this-on-stderr" in c.system_err for c in cases)
    xmlschema.XMLSchema(str(pytest_junit_schema)).validate(str(tmp_path / "junit.xml"))
    features = json.loads((tmp_path / "cucumber.json").read_text())
    said = [o for f in features for e in f["elements"] for s in e["steps"] for o in s.get("output", [])]
    assert sum("routing-said-this-on-stderr" in o for o in said) == len(failed)
    attached = [e for e in _read_messages(tmp_path / "cucumber.ndjson") if e.attachment]
    assert len(attached) == len(failed) and all("routing-said-this-on-stderr" in e.attachment.body for e in attached)
