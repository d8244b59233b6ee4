"""Plugging an implementation in: another language, entry points, settings files, expectations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sbtck.errors import IUTSpecError
from sbtck.iut.loader import factory_for
from tests.helpers import ROOT, scenarios_tagged

NODE_EXAMPLE = ROOT / "examples" / "node-periodic" / "broker.js"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sbtck.cli", "run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed (apt-get install nodejs)")
def test_the_node_example_passes_what_it_supports_and_the_rest_is_not_applicable(tmp_path: Path) -> None:
    import json

    proc = _run(["--iut", f"cmd:node {NODE_EXAMPLE}", "--out", str(tmp_path)], ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    scenarios = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    by_status: dict[str, list[str]] = {}
    for s in scenarios:
        by_status.setdefault(s["status"], []).append(s["feature_path"])
    assert set(by_status) == {"passed", "not applicable"}
    assert {Path(p).name for p in by_status["passed"]} == {
        "01_timer.feature",
        "02_task_handlers.feature",
        "07_broker_start_and_notices.feature",
        "08_every_one_of_them.feature",
    }
    assert len(by_status["not applicable"]) > 100


def test_the_reference_engine_is_also_an_entry_point() -> None:
    from importlib.metadata import entry_points

    assert "reference" in {ep.name for ep in entry_points(group="sbtck.implementations")}
    with pytest.raises(IUTSpecError, match="entry points: reference"):
        factory_for("no-such-broker")


def test_settings_come_from_sbtck_toml_and_the_command_line_wins(tmp_path: Path) -> None:
    (tmp_path / "sbtck.toml").write_text('tags = "ACT-09"\nout = "report"\n')
    proc = _run([], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert f"settings from {tmp_path / 'sbtck.toml'}" in proc.stdout
    assert f"{scenarios_tagged('ACT-09')} passed" in proc.stdout and (tmp_path / "report" / "index.html").exists()
    proc = _run(["--tags", "ACT-10", "--out", str(tmp_path / "other")], tmp_path)
    assert f"{scenarios_tagged('ACT-10')} passed" in proc.stdout, proc.stdout[-1500:]


def test_settings_in_pyproject_and_a_bad_key(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.sbtck]\ntags = "ACT-09"\nouts = "x"\n')
    proc = _run([], tmp_path)
    assert proc.returncode == 2
    assert "unknown setting 'outs'; did you mean 'out'?" in proc.stderr


def test_an_expectations_file_marks_known_failures(tmp_path: Path) -> None:
    import json

    known = "features/activation/05_internal_activation.feature::[2] At MAX_QUEUE_READERS no further procedure starts"
    (tmp_path / "expected.yaml").write_text(f'expected_failures:\n  - "{known}"\n')
    proc = _run(
        [
            "--iut",
            "python:tests.variants.activation:ignores_max_queue_readers",
            "--expectations",
            str(tmp_path / "expected.yaml"),
            "--tags",
            "ACT-10",
            "--out",
            str(tmp_path / "out"),
        ],
        ROOT,
    )
    statuses = {s["id"]: s["status"] for s in json.loads((tmp_path / "out" / "results.json").read_text())["scenarios"]}
    assert statuses[known] == "expected failure"
    (tmp_path / "bad.yaml").write_text("- not a scenario id\n")
    proc = _run(["--expectations", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "o2")], ROOT)
    assert proc.returncode == 2 and "expected a list of scenario ids" in proc.stdout + proc.stderr
    # a scenario renamed since the list was written is named, with the nearest id, before anything runs
    (tmp_path / "old.yaml").write_text(f'- "{known[:-3]}"\n')
    proc = _run(["--expectations", str(tmp_path / "old.yaml"), "--out", str(tmp_path / "o3")], ROOT)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2 and f"no scenario {known[:-3]!r} (did you mean {known!r}?)" in said
    assert "passed" not in said


def test_a_project_of_its_own_keeps_its_exit_status_with_the_kit_installed(tmp_path: Path) -> None:
    """The kit's pytest11 plugin loads in every session of its environment; its verdict "nothing ran" is for a
    session that collected the kit's scenarios, never for a project's own tests."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    for extra in ([], ["--collect-only"]):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_one.py", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "sbtck" in next(line for line in proc.stdout.splitlines() if line.startswith("plugins:"))
        assert proc.returncode == 0, proc.stdout[-2000:]


def test_a_python_implementation_in_the_current_folder_is_found_by_the_console_scripts(tmp_path: Path) -> None:
    """`sbtck run --iut python:mybroker:make` from the folder that holds mybroker.py, as the README says."""
    (tmp_path / "mybroker.py").write_text("from sbtck.iut.reference import reference as make\n")
    script = Path(sys.executable).parent / "sbtck"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(script), "run", "--iut", "python:mybroker:make", "--tags", "ACT-06", "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sbtck: conforms" in proc.stdout


def test_an_unrelated_pytest_bdd_project_with_tags_never_wakes_the_kit(tmp_path: Path) -> None:
    """A pytest-bdd project of its own, tagged and bound, in the kit's environment: the kit stays unloaded (F12),
    as a session that names a --sbtck-* option, collects the kit's features or carries its tags would load it."""
    (tmp_path / "smoke.feature").write_text(
        "@smoke\nFeature: Cart\n  @fast\n  Scenario: Add\n    Given a cart\n    Then it has 0 items\n"
    )
    (tmp_path / "test_cart.py").write_text(
        "import sys\n"
        "from pytest_bdd import given, scenarios, then\n\n"
        'scenarios("smoke.feature")\n\n\n'
        '@given("a cart")\ndef cart():\n    pass\n\n\n'
        '@then("it has 0 items")\ndef empty():\n'
        '    assert "sbtck.suite" not in sys.modules, "the kit woke"\n'
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    smoke: s\n    fast: f\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_cart.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


PLAIN = '''\
from sbtck import contract
from sbtck.fixtures.topology import named


def test_a_stalled_queue_starts_no_more_readers_than_its_maximum(sbtck_world):
    """Five messages to a queue whose procedure never reads: MAX_QUEUE_READERS (3) tasks, no more."""
    sbtck_world.start(named("activation"))
    sbtck_world.run(contract.BeginDialog(sbtck_world.at(), "D1", "sql1", "shop", "Initiator", "StallService"))
    for _ in range(5):
        sbtck_world.run(contract.Send(sbtck_world.at(), "D1"))
    tasks = sbtck_world.view("sys.dm_broker_activated_tasks")
    assert len(tasks) == 3
'''


def test_the_public_fixture_drives_an_implementation_from_a_plain_pytest_test(tmp_path: Path) -> None:
    """sbtck_world: the implementation under test (--sbtck-iut), a frozen clock and the log, with no Gherkin."""
    (tmp_path / "test_plain.py").write_text(PLAIN)

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_plain.py", *extra],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    reference = run()
    assert reference.returncode == 0, reference.stdout[-3000:]
    wrong = run("--sbtck-iut", "python:tests.variants.activation:ignores_max_queue_readers")
    assert wrong.returncode == 1 and "assert 5 == 3" in wrong.stdout, wrong.stdout[-3000:]


def test_the_woken_plugins_modules_keep_real_time_under_a_scenarios_clock() -> None:
    """They time the steps and hold the implementation to its budgets while a scenario's clock is frozen, which
    only the modules freezegun leaves alone can: sbtck/fixtures/clock.py names them by the prefix sbtck.suite."""
    import importlib

    import freezegun.config

    import sbtck

    importlib.import_module("sbtck.fixtures.clock")  # configures freezegun's list when imported
    left_alone = tuple(freezegun.config.settings.default_ignore_list)
    modules = [f"sbtck.{path.stem}" for path in Path(sbtck.__file__).parent.glob("suite*.py")]
    assert "sbtck.suite_recording" in modules
    assert [module for module in modules if not module.startswith(left_alone)] == []
