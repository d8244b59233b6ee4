"""``sbtck run`` as a user runs it: reports written, exit status, bad input explained."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sbtck.reports.results import INFORMATIVE
from tests.helpers import ROOT, kit, sbtck, scenarios_tagged

FEATURES = sorted((ROOT / "features").rglob("*.feature"))


def _scenario_count() -> int:
    return sum(line.lstrip().startswith("Scenario:") for f in FEATURES for line in f.read_text().splitlines())


def test_run_writes_report_junit_and_results(tmp_path: Path) -> None:
    run = sbtck(out=tmp_path)
    assert run.code == 0, run.output[-2000:]
    results = run.results()
    assert len(results["scenarios"]) == _scenario_count()
    assert results["implementation"]["name"] == "sbtck reference engine"
    assert results["profile"]["params"]["external_activation_timeout_s"] == 60
    assert all(s["rules"] or INFORMATIVE in s["tags"] for s in results["scenarios"])
    assert "<testsuite" in (tmp_path / "junit.xml").read_text()
    page = (tmp_path / "index.html").read_text()
    assert "ACT-09" in page and "conforms" in page
    assert f"report: {tmp_path / 'index.html'}" in run.output


def test_tags_pick_scenarios_and_an_unknown_tag_is_explained(tmp_path: Path) -> None:
    run = sbtck("--tags", "ACT-09", out=tmp_path / "a")
    assert run.code == 0
    assert {s["feature_path"] for s in run.results()["scenarios"]} == {
        "features/activation/04_conversation_group_locking.feature",
        "features/activation/06_external_activation.feature",
    }
    bad = sbtck("--tags", "ACT-99", out=tmp_path / "b")
    assert bad.code == 2
    assert "ACT-99" in bad.output


def test_a_bad_iut_spec_or_profile_stops_before_any_scenario(tmp_path: Path) -> None:
    run = sbtck("--iut", "python:no.such.module:make", out=tmp_path / "a")
    assert run.code == 2
    assert "cannot import module 'no.such.module'" in run.output
    run = sbtck("--iut", "docker", out=tmp_path / "b")
    assert run.code == 2 and "unknown kind of implementation" in run.output
    (tmp_path / "a-file").write_text("")
    run = sbtck(out=tmp_path / "a-file" / "report")
    assert run.code == 2 and "cannot write there (Not a directory)" in run.output
    assert "passed" not in run.output  # refused before the run, not after it
    run = sbtck("--iut", "tcp:127.0.0.1:99999", out=tmp_path / "d")
    assert run.code == 2 and "a port is a number from 1 to 65535" in run.output
    profile = tmp_path / "p.yaml"
    profile.write_text("implementation: {name: x}\nparams:\n  timer_period_s: 7\n")
    run = sbtck("--profile", str(profile), out=tmp_path / "c")
    assert run.code == 2
    assert "p.yaml:3: params.timer_period_s: the documents fix timer_period_s at 5" in run.output


def _profile(tmp_path: Path, **extra: object) -> Path:
    data = {
        "implementation": {"name": "mine", "version": "2"},
        "params": {
            "activation_empty_window_s": 5,
            "external_activation_timeout_s": 60,
            "delayed_retry_s": 10,
            "forward_hop_limit": 4,
        },
        "capabilities": [
            "activation",
            "external_activation",
            "routing",
            "mirroring",
            "dynamic_routing",
            "forwarding",
            "periodic_tasks",
        ],
        **extra,
    }
    path = tmp_path / "profile.yaml"
    path.write_text(json.dumps(data))
    return path


def test_scenarios_read_expected_times_from_the_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile's time-out times the scenarios: the reference run with 30 s passes a profile of 30 s, and a
    profile of 30 s beside a handshake of 60 s is every scenario's error naming both."""
    params = {"activation_empty_window_s": 5, "external_activation_timeout_s": 30, "delayed_retry_s": 10}
    profile = _profile(tmp_path, params={**params, "forward_hop_limit": 4})
    monkeypatch.setenv("SBTCK_TUNED", "external_activation_timeout_s=30")
    tuned = sbtck(
        "--iut", "python:tests.fakes.tuned:tuned", "--profile", str(profile), "--tags", "ACT-13", out=tmp_path / "t"
    )
    assert tuned.code == 0, tuned.output[-3000:]
    assert set(tuned.statuses().values()) == {"passed"}
    monkeypatch.delenv("SBTCK_TUNED")
    run = sbtck("--profile", str(profile), "--tags", "ACT-13", out=tmp_path / "out")
    assert run.code == 1
    assert set(run.statuses().values()) == {"error"}
    assert "external_activation_timeout_s = 30 in the profile, 60 in the handshake" in run.output


def test_a_missing_capability_is_not_applicable_not_a_pass(tmp_path: Path) -> None:
    profile = _profile(tmp_path, capabilities=["activation", "routing", "periodic_tasks"])
    run = sbtck("--profile", str(profile), out=tmp_path / "out")
    assert run.code == 0
    statuses = run.statuses()
    external = {sid: s for sid, s in statuses.items() if "06_external_activation" in sid}
    assert external and set(external.values()) == {"not applicable"}
    assert (
        statuses[
            "features/activation/03_activation_necessary.feature::"
            "[13] Internal and external activation follow the same necessity decision"
        ]
        == "not applicable"
    )
    assert "passed" in statuses.values()


def test_expected_failures_and_unexpected_passes(tmp_path: Path) -> None:
    fails = "features/activation/05_internal_activation.feature::[2] At MAX_QUEUE_READERS no further procedure starts"
    passes = "features/activation/01_queue_monitors.feature::[3] A queue with neither has no queue monitor"
    profile = _profile(tmp_path, expected_failures=[fails, passes])
    run = sbtck(
        "--iut",
        "python:tests.variants.activation:ignores_max_queue_readers",
        "--profile",
        str(profile),
        "--tags",
        "ACT-10 or ACT-03",
        out=tmp_path / "out",
    )
    statuses = run.statuses()
    assert statuses[fails] == "expected failure"
    assert statuses[passes] == "unexpected pass"


def test_an_implementation_that_crashes_is_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    run = sbtck("--iut", "python:tests.variants.activation:crashes_on_d2", out=tmp_path)
    assert run.code == 1
    results = run.results()["scenarios"]
    errors = [s for s in results if s["status"] == "error"]
    assert errors and all("the implementation fell over" in s["failure"]["message"] for s in errors)
    assert len(results) == _scenario_count()
    assert sum(s["status"] == "passed" for s in results) > len(results) // 2


def test_a_crash_behind_the_protocol_is_an_error_as_in_process(tmp_path: Path) -> None:
    # sbtck serve answers the crash with "fault": true, so it is not taken for the broker refusing the SEND
    inside = sbtck("--iut", "python:tests.variants.activation:crashes_on_d2", "--tags", "ACT-13", out=tmp_path / "a")
    served = f"cmd:{sys.executable} -m sbtck serve --stdio --iut python:tests.variants.activation:crashes_on_d2"
    behind = sbtck("--iut", served, "--tags", "ACT-13", out=tmp_path / "b")
    assert "error" in inside.statuses().values()
    assert behind.statuses() == inside.statuses()
    failures = [s["failure"]["message"] for s in behind.results()["scenarios"] if s["status"] == "error"]
    assert failures and all("failed on send" in m and "the implementation fell over" in m for m in failures)


BAD_FEATURE = '''@ACT-02
Feature: bad input
  Scenario: [1] A typo in the topology
    Given the topology:
      """
      instances:
        sql1:
          databases:
            shop:
              queues:
                Q: {activation: {status: ON, procedure_name: p, max_readers: 1}}
      """
    Then queue "Q" has a queue monitor

  Scenario: [2] The next scenario still runs
    Given the topology "activation"
    Then queue "StallQueue" has a queue monitor

  Scenario: [3] Time cannot go back
    Given the topology "activation"
    When time passes to second -5
    Then queue "StallQueue" has a queue monitor

  Scenario: [4] Time is a number of seconds
    Given the topology "activation"
    When time passes to second soon
    Then queue "StallQueue" has a queue monitor

  Scenario: [5] A fault names an instance of the topology
    Given the topology "periodic"
    When 2 task handlers of "sql9" fail
    Then "sql1" has 4 running task handlers

  Scenario: [6] A CPU count is at least one
    Given the topology:
      """
      instances:
        sql1: {cpus: 0}
      """
    Then "sql1" has 0 running task handlers

  Scenario: [7] A misspelled ALTER QUEUE option
    Given the topology "activation"
    When ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_READERS = 2)
    Then queue "StallQueue" has a queue monitor

  Scenario: [8] A misspelled route-table column
    Given the topology "routing"
    And the routes in msdb of "sql2" are:
      | name | service_nam | address |
      | R    | Target      | LOCAL   |
    Then queue "StallQueue" has a queue monitor

  Scenario: [9] A log table without an event column
    Given the topology "activation"
    Then the log shows exactly:
      | second | queue      |
      | 0      | StallQueue |
'''


def test_bad_input_in_a_scenario_is_an_error_naming_the_place_and_the_run_continues(tmp_path: Path) -> None:
    (tmp_path / "bad.feature").write_text(BAD_FEATURE)
    (tmp_path / "test_bad.py").write_text("from pytest_bdd import scenarios\nscenarios('bad.feature')\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "--sbtck-out",
            str(tmp_path / "out"),
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    by_name = {s["name"][:3]: s for s in data["scenarios"]}
    assert len(by_name) == 9, proc.stdout[-2000:]
    assert by_name["[2]"]["status"] == "passed"
    expected = {
        "[1]": "queues.Q.activation.max_readers: unknown key 'max_readers'; did you mean 'max_queue_readers'?",
        "[3]": "time passes to second -5: time cannot go back: the scenario is at second 0, asked for second -5",
        "[4]": "cannot read 'soon' as a time",
        "[5]": "no instance 'sql9' in topology",
        "[6]": "instances.sql1.cpus: expected a whole number >= 1, got 0",
        # the scenario's own mistakes: errors of the suite, never failures of the implementation
        "[7]": "cannot read ACTIVATION option 'MAX_READERS = 2'",
        "[8]": "route R: unknown column(s) service_nam",
        "[9]": "a log table needs an 'event' column",
    }
    for number, text in expected.items():
        record = by_name[number]
        assert record["status"] == "error", (number, record["failure"])
        assert text in record["failure"]["message"], (number, record["failure"]["message"])
    assert by_name["[1]"]["failure"]["message"].startswith("bad.feature:11: ")  # relative to the session's rootdir
    assert by_name["[6]"]["failure"]["message"].startswith("bad.feature:38: ")


def test_the_rerun_command_of_a_failure_runs_that_scenario_alone(tmp_path: Path) -> None:
    import shlex

    run = sbtck("--iut", "python:tests.variants.routing:pinning_ignored", out=tmp_path / "all")
    failed = [s for s in run.results()["scenarios"] if s["status"] == "failed"]
    assert failed
    words = shlex.split(failed[0]["rerun"])
    assert words[:2] == ["sbtck", "run"]
    # the command names an --out of its own, beside the run's
    own = Path(words[words.index("--out") + 1])
    assert own.parent == tmp_path / "all" / "reruns"
    again = sbtck(*words[2:], out=own)
    assert again.code == 1
    assert [s["id"] for s in again.results()["scenarios"]] == [failed[0]["id"]]


def test_only_a_node_id_after_dashes_replaces_the_suite_an_options_value_passes_through(tmp_path: Path) -> None:
    """`-W error::DeprecationWarning` and `--deselect FILE::TEST` hold `::` but name no scenario to run alone."""
    tagged = scenarios_tagged("ACT-09")
    warned = sbtck("--tags", "ACT-09", "--", "-W", "error::DeprecationWarning", out=tmp_path / "w")
    assert warned.code == 0, warned.output[-2000:]
    assert len(warned.results()["scenarios"]) == tagged
    node = shlex.split(warned.results()["scenarios"][0]["rerun"])[-1]
    assert "::" in node
    for given in (["--deselect", node], [f"--deselect={node}"]):
        deselected = sbtck("--tags", "ACT-09", "--", *given, out=tmp_path / "d")
        assert deselected.code == 0, deselected.output[-2000:]
        assert len(deselected.results()["scenarios"]) == tagged - 1
    alone = sbtck("--", "-W", "error::DeprecationWarning", node, out=tmp_path / "n")
    assert alone.code == 0 and len(alone.results()["scenarios"]) == 1, alone.output[-2000:]


def test_an_implementation_that_cannot_be_started_or_reached_stops_the_run_with_one_line(tmp_path: Path) -> None:
    """No such program, nothing listening, no such image: the user's setup, said once with exit 2, not a red report
    of every scenario erring."""
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "broker.py"
    script.write_text("print('a broker')\n")  # no execute bit
    for spec, said in (
        ("cmd:no-such-broker-program --stdio", "no such program on PATH"),
        (f"cmd:{script}", "the file is not executable"),
        (f"tcp:127.0.0.1:{port}", "Connection refused"),
        ("image:sbtck-no-such-image:never", "not in the local Docker engine"),
    ):
        out = tmp_path / spec.split(":")[0]
        run = sbtck("--iut", spec, "--tags", "ACT-09", out=out)
        assert run.code == 2, (spec, run.output[-2000:])
        lines = [line for line in run.output.splitlines() if said in line]
        assert len(lines) == 1 and lines[0].startswith("ERROR: --iut "), (spec, run.output[-2000:])
        assert "Traceback" not in run.output and "error" not in run.output.lower().replace(lines[0].lower(), "")
        assert not (out / "results.json").exists()
    # with a profile the handshake is not needed to start, and the program is still tried before any scenario
    profile = str(ROOT / "engine" / "profile.yaml")
    run = sbtck("--iut", "cmd:no-such-broker-program", "--profile", profile, "--tags", "ACT-09", out=tmp_path / "p")
    assert run.code == 2 and "no such program on PATH" in run.output, run.output[-2000:]


def test_the_terminal_line_says_how_many_passes_are_informative(tmp_path: Path) -> None:
    """An informative scenario's pass judges nothing: "264 passed" alone read as 264 scenarios' worth (cr13's G12)."""
    run = sbtck("--tags", "informative or ACT-02", out=tmp_path / "t")
    informative = scenarios_tagged("informative")
    assert run.code == 0 and informative > 0, run.output[-2000:]
    n = len(run.results()["scenarios"])
    assert f"{n} passed ({informative} of the passes informative, judging nothing); report: " in run.output


def test_a_selection_is_part_of_the_verdict_and_never_reads_as_the_whole_suite(tmp_path: Path) -> None:
    total = _scenario_count()
    tagged = sbtck("--tags", "ACT-09", out=tmp_path / "t")
    assert tagged.code == 0, tagged.output[-2000:]
    n = scenarios_tagged("ACT-09")
    words = f"on {n} of {total} scenarios, selected by --tags 'ACT-09'"
    assert tagged.results()["selection"] == {"scenarios": n, "of": total, "by": "--tags 'ACT-09'"}
    assert f"sbtck: conforms {words}: {n} passed; report: " in tagged.output
    assert words in html.unescape((tagged.out / "index.html").read_text())
    keyword = sbtck("--", "-k", "MAX_QUEUE_READERS", out=tmp_path / "k")
    selection = keyword.results()["selection"]
    assert selection["by"] == "-k 'MAX_QUEUE_READERS'" and 0 < selection["scenarios"] < total
    assert f"sbtck: conforms on {selection['scenarios']} of {total} scenarios, selected by -k " in keyword.output
    # a subset that fails says its selection too: it is no verdict on the whole suite either way
    wrong = "python:tests.variants.activation:get_conversation_group_takes_the_messages"
    failing = sbtck("--iut", wrong, "--tags", "ACT-09", out=tmp_path / "f")
    assert failing.code == 1, failing.output[-2000:]
    banner = html.unescape((failing.out / "index.html").read_text()).split('class="counts"')[0]
    assert "does not conform on a selection" in banner and words in banner, banner[-1500:]


def test_tags_in_cucumbers_syntax_or_pytests_and_a_tag_no_scenario_carries_is_named(tmp_path: Path) -> None:
    n = scenarios_tagged("ACT-09")
    cucumber = sbtck("--tags", "@ACT-09 and not @informative", out=tmp_path / "c")
    assert cucumber.code == 0 and len(cucumber.results()["scenarios"]) == n, cucumber.output[-2000:]
    lower = sbtck("--tags", "act-09 or ACT-10", out=tmp_path / "l")
    assert lower.code == 2 and "no scenario carries the tag 'act-09' (did you mean 'ACT-09'?)" in lower.output
    # no word of pytest's own -m option (a path such as /work/wt-me is no mention of it)
    assert not re.search(r"(^|\s)-m(\s|$)", lower.output) and "markers" not in lower.output
    broken = sbtck("--tags", "ACT-09 or", out=tmp_path / "b")
    assert broken.code == 2 and "--tags 'ACT-09 or': not a tag expression" in broken.output
    keyword = sbtck("--tags", "ACT-09", "--", "-k", "no_such_scenario_at_all", out=tmp_path / "k")
    assert keyword.code == 2
    assert "no scenario matches --tags 'ACT-09' and -k 'no_such_scenario_at_all'" in keyword.output


def test_an_empty_tags_option_clears_the_settings_tags(tmp_path: Path) -> None:
    (tmp_path / "sbtck.toml").write_text('tags = "ACT-09"\n')

    def count(*args: str) -> int:
        out = tmp_path / "o"
        subprocess.run(
            [sys.executable, "-m", "sbtck.cli", "run", "--out", str(out), *args, "--", "-k", "reader"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return len(json.loads((out / "results.json").read_text())["scenarios"])

    assert count() < count("--tags", "")


def test_run_help_says_where_settings_are_found() -> None:
    """As pytest finds its rootdir: the current folder and up from it, not the current folder alone (F15)."""
    from tests.helpers import kit

    said = " ".join(kit("run", "--help").stdout.split())
    assert "in the current folder or the nearest folder above it" in said


def test_warnings_as_errors_after_dashes_run_the_suite_with_no_traceback(tmp_path: Path) -> None:
    """`-W error` turns every warning into an error, and the kit's own (its modules imported before pytest could
    rewrite them) is no business of the user's (F7)."""
    run = sbtck("--tags", "ACT-09", "--", "-W", "error", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert "Traceback" not in run.output and len(run.results()["scenarios"]) == scenarios_tagged("ACT-09")


def test_no_cacheprovider_after_dashes_hears_nothing_of_the_kits_cache_folder(tmp_path: Path) -> None:
    run = sbtck("--tags", "ACT-09", "--", "-p", "no:cacheprovider", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert "cache_dir" not in run.output


def test_a_run_leaves_no_lock_file_and_the_command_imports_without_fcntl(tmp_path: Path) -> None:
    from sbtck.lock import RUN_LOCK

    run = sbtck("--tags", "ACT-09", out=tmp_path)
    assert run.code == 0 and not (tmp_path / RUN_LOCK).exists(), run.output[-2000:]
    # as on Windows, where there is no fcntl
    code = "import sys; sys.modules['fcntl'] = None; import sbtck.cli"
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert imported.returncode == 0, imported.stderr[-2000:]


def test_a_generator_in_an_installed_kit_writes_no_file_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m sbtck.iut.protocol_doc` in an installed kit: its documents in site-packages stay as installed."""
    from sbtck import generated

    installed = tmp_path / "site-packages" / "sbtck" / "docs"
    installed.mkdir(parents=True)
    (installed / "protocol.md").write_text("as installed\n")
    monkeypatch.setattr(generated, "docs", lambda: installed)
    generated.main("protocol.md", lambda old: old + "made anew\n", [])
    assert (installed / "protocol.md").read_text() == "as installed\n"
    said = capsys.readouterr()
    assert said.out == "as installed\nmade anew\n" and "an installed kit" in said.err
    generated.main("protocol.md", lambda old: "to a file\n", [str(tmp_path / "mine.md")])
    assert (tmp_path / "mine.md").read_text() == "to a file\n"


def test_a_generator_given_an_option_writes_nothing_and_says_its_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m sbtck.iut.protocol_doc --help` wrote the document into a file named --help."""
    from sbtck import generated

    monkeypatch.chdir(tmp_path)
    for argv in (["--help"], ["-h"], ["a.md", "b.md"]):
        with pytest.raises(SystemExit, match=r"usage: python -m MODULE \[PATH \| -\]"):
            generated.main("protocol.md", lambda old: "text\n", argv)
    assert list(tmp_path.iterdir()) == []


def test_an_image_without_the_containers_extra_stops_the_run_with_one_line(tmp_path: Path) -> None:
    """F3's third case: --iut image:NAME where testcontainers is not installed is the user's setup (the extra
    missing), said once with exit 2, as a bad implementation spec is."""
    hidden = tmp_path / "hidden" / "testcontainers"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError(\"No module named 'testcontainers'\")\n")
    out = tmp_path / "o"
    pythonpath = os.pathsep.join([str(tmp_path / "hidden"), str(ROOT)])
    proc = kit("run", "--iut", "image:sbtck-reference:any", "--tags", "ACT-09", "--out", str(out),
               env={"PYTHONPATH": pythonpath})  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said[-2000:]
    lines = [line for line in said.splitlines() if "needs the testcontainers package" in line]
    assert len(lines) == 1 and "pip install 'sbtck[containers]'" in lines[0], said[-2000:]
    assert "Traceback" not in said and not (out / "results.json").exists()


def test_dry_run_binds_every_step_and_loads_every_topology_and_runs_nothing(tmp_path: Path) -> None:
    """Cucumber's --dry-run: the implementation is never started (a program that does not exist is fine)."""
    n = scenarios_tagged("ACT-09")
    dry = sbtck("--dry-run", "--iut", "cmd:no-such-broker-program", "--tags", "ACT-09", out=tmp_path / "d")
    assert dry.code == 0, dry.output[-3000:]
    assert f"sbtck: dry run: {n} scenarios bind and their topologies load; nothing ran" in dry.output
    assert not (tmp_path / "d" / "results.json").exists()
    workers = sbtck("--dry-run", "--tags", "ACT-09", "--", "-n", "2", out=tmp_path / "x")
    assert f"sbtck: dry run: {n} scenarios bind" in workers.output, workers.output[-3000:]
    feature = tmp_path / "mine.feature"
    feature.write_text(
        'Feature: Mine\n  Scenario: [1] a mistyped step\n    Given the topology "activation"\n'
        '    When a mesage is sent on dialog "D1"\n\n'
        "  Scenario: [2] a topology that does not load\n    Given the topology:\n"
        '      """\n      instances: 5\n      """\n'
    )
    bad = sbtck("--dry-run", "--features", str(feature), out=tmp_path / "b")
    assert bad.code == 2, bad.output[-3000:]
    assert "no step definition reads When 'a mesage is sent on dialog \"D1\"'" in bad.output
    assert "; did you mean '" in bad.output
    assert "mine.feature:9: instances: expected a mapping" in bad.output
    assert "sbtck: dry run: 0 of 2 scenarios bind" in bad.output


def test_timeout_on_the_command_line_is_how_long_a_request_waits(tmp_path: Path) -> None:
    hang = f"cmd:{sys.executable} {ROOT / 'tests' / 'fakes' / 'misbehaving.py'} hang"
    run = sbtck("--iut", hang, "--timeout", "1", "--tags", "ACT-09", out=tmp_path / "h", timeout=120)
    messages = [s["failure"]["message"] for s in run.results()["scenarios"] if s["failure"]]
    assert messages and all("within 1 seconds" in m for m in messages), messages[:1]
    bad = sbtck("--timeout", "soon", out=tmp_path / "b")
    assert bad.code == 2 and "--timeout 'soon': a number of seconds above 0" in bad.output


def test_docs_topologies_lists_every_instance_queue_and_service_of_each_topology() -> None:
    import yaml

    from tests.helpers import kit

    shown = kit("docs", "topologies")
    assert shown.returncode == 0, shown.stderr
    for path in sorted((ROOT / "fixtures" / "topologies").glob("*.yaml")):
        assert f"\n## {path.stem}\n" in shown.stdout
        section = shown.stdout.split(f"\n## {path.stem}\n", 1)[1].split("\n## ", 1)[0]
        for name, instance in yaml.safe_load(path.read_text())["instances"].items():
            assert f"instance `{name}` ({instance['address']}" in section
            for database in instance.get("databases", {}).values():
                assert all(f"queue `{queue}`" in section for queue in database.get("queues", {}))
                assert all(f"service `{s}` on `{v['queue']}`" in section for s, v in database["services"].items())


def test_the_cache_folder_is_the_platforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    from sbtck.workloads import sparkling

    monkeypatch.delenv(sparkling.CACHE_SETTING, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert sparkling.cache_folder() == platformdirs.user_cache_path("sbtck") == tmp_path / "xdg" / "sbtck"
    monkeypatch.setenv(sparkling.CACHE_SETTING, str(tmp_path / "mine"))
    assert sparkling.cache_folder() == tmp_path / "mine"
