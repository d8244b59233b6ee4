"""A user's own project with the kit installed: the plugin stays out of the way until the kit is used, and then
serves the project's own features, settings, markers and pytest habits as pytest itself would.

Each test runs pytest or sbtck in a child process, in a project folder of its own outside the checkout, with the
kit as installed (no PYTHONPATH); scripts/check-wheel.sh does the same from a built wheel in a fresh venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "user-project"
ORDERS = "features/orders.feature::[1] Orders are taken by two procedures at most"


def _in(
    folder: Path, *argv: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    return project


def test_a_plain_session_imports_nothing_of_the_kit_but_its_plugin(tmp_path: Path) -> None:
    """The plugin loads in every pytest session of its environment: there it only adds options (issue 34, E18)."""
    (tmp_path / "test_one.py").write_text(
        "import sys\n\ndef test_one():\n"
        "    kit = sorted(m for m in sys.modules if m.startswith('sbtck.') and m != 'sbtck.plugin')\n"
        "    assert kit == ['sbtck.errors', 'sbtck.resources'], kit\n"
        "    assert not any(m.startswith(('freezegun', 'yaml', 'msgspec')) for m in sys.modules)\n"
    )
    proc = _in(tmp_path, "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "test_one.py")
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_the_plugin_switched_off_beside_the_kits_scenarios_is_one_line(tmp_path: Path) -> None:
    project = _project(tmp_path)
    proc = _in(project, "pytest", "-p", "no:sbtck", "tests/test_kit.py")
    assert proc.returncode != 0
    assert "sbtck: the kit's pytest plugin is off (-p no:sbtck" in proc.stdout
    assert "failed" not in proc.stdout and "Step definition is not found" not in proc.stdout, proc.stdout[-2000:]


def test_a_mistyped_step_names_the_nearest_phrases(tmp_path: Path) -> None:
    project = _project(tmp_path)
    feature = project / "features" / "orders.feature"
    feature.write_text(feature.read_text().replace("a message is sent on dialog", "a mesage is sent on dialog"))
    proc = _in(project, "pytest", "-q", "-m", "orders", "--sbtck-out", "out")
    assert proc.returncode == 1
    said = "no step definition reads Given 'a mesage is sent on dialog \"O1\"' (features/orders.feature, line"
    assert said in proc.stdout and "did you mean" in proc.stdout, proc.stdout[-3000:]
    # the kit's words alone, not after pytest-bdd's frames
    assert "pytest_bdd/scenario.py" not in proc.stdout
    (record,) = json.loads((project / "out" / "results.json").read_text())["scenarios"]
    assert record["status"] == "error" and "did you mean" in record["failure"]["message"]


def test_an_implementation_fault_is_said_first_in_plain_pytest(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "broken.py").write_text("def make():\n    raise RuntimeError('no broker today')\n")
    proc = _in(project, "pytest", "-q", "-m", "orders", "--sbtck-iut", "python:broken:make")
    assert proc.returncode == 1
    failure = proc.stdout.split(" FAILURES ")[1]
    first = failure.splitlines()[2]
    said = "ImplementationFault: --iut python:broken:make: no usable handshake: the factory failed: RuntimeError"
    assert first.startswith(said), failure
    assert "def world(" not in failure


def test_the_features_of_a_project_run_under_its_own_pytest_configuration(tmp_path: Path) -> None:
    """`sbtck run --features` keeps the project's markers (a tag of its own under --strict-markers), its python:
    implementation and its [tool.sbtck] settings, found from a subfolder (issue 34, E4, E16, E2)."""
    project = _project(tmp_path)
    proc = _in(project / "tests", "sbtck", "run", "--features", "../features")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]  # from a subfolder, on the reference
    proc = _in(project, "sbtck", "run", "--features", "features", "--iut", "python:orders_broker:make")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"sbtck: settings from {project / 'pyproject.toml'}" in proc.stdout
    assert "PytestAssertRewriteWarning" not in proc.stdout + proc.stderr
    results = json.loads((project / "out" / "kit" / "results.json").read_text())
    assert results["implementation"]["name"] == "orders broker"
    assert results["settings"] == str(project / "pyproject.toml")
    assert [(s["id"], s["status"]) for s in results["scenarios"]] == [(ORDERS, "passed")]
    assert "settings from <code>" in (project / "out" / "kit" / "index.html").read_text()


def test_settings_are_found_walking_up_and_the_report_goes_beside_them(tmp_path: Path) -> None:
    project = _project(tmp_path)
    proc = _in(project / "features", "sbtck", "run", "--tags", "ACT-13")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (project / "out" / "kit" / "results.json").is_file()
    assert not (project / "features" / "out").exists()
    # a pyproject.toml without [tool.sbtck] is a project's root: no settings from beyond it
    inner = project / "features" / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    proc = _in(inner, "sbtck", "run", "--tags", "ACT-13")
    assert proc.returncode == 0 and "settings from" not in proc.stdout
    assert (inner / "out" / "report" / "results.json").is_file()


def test_last_failed_and_failed_first_work_under_sbtck_run(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "half.py").write_text(
        "from sbtck import contract\nfrom sbtck.iut.reference import ReferenceImplementation\n\n\n"
        "class Half(ReferenceImplementation):\n"
        "    def execute(self, command):\n"
        "        if isinstance(command, contract.Send) and command.dialog == 'D2':\n"
        "            return contract.Response(error='nothing on D2 today')\n"
        "        return super().execute(command)\n\n\n"
        "def make():\n    return Half(name='half')\n"
    )
    run = ("sbtck", "run", "--iut", "python:half:make", "--tags", "ACT-05 or ACT-09")
    first = _in(project, *run)
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    results = project / "out" / "kit" / "results.json"
    statuses = {s["id"]: s["status"] for s in json.loads(results.read_text())["scenarios"]}
    failed = {i for i, status in statuses.items() if status != "passed"}
    assert failed and len(failed) < len(statuses)
    again = _in(project, *run, "--", "--lf")
    assert "run-last-failure: rerun previous" in again.stdout, again.stdout[-2000:]
    assert {s["id"] for s in json.loads(results.read_text())["scenarios"]} == failed
    first_first = _in(project, *run, "--", "--ff", "-x")
    assert first_first.returncode == 1
    (only,) = json.loads(results.read_text())["scenarios"]  # -x: the first to run failed, as --ff puts it first
    assert only["id"] in failed


def test_the_runs_budget_counts_the_kits_scenarios_not_the_sessions_other_tests(tmp_path: Path) -> None:
    """A session that collects the kit's scenarios beside slower tests of its own (the kit's CI does: its tests
    and the suite in one session) spends the run's budget only in the scenarios: a CI run that took longer than
    SBTCK_RUN_BUDGET_S failed every scenario that came after the budget's hour (stop 54)."""
    project = _project(tmp_path)
    (project / "tests" / "test_a_slow_one.py").write_text("import time\n\ndef test_slow():\n    time.sleep(3)\n")
    slow_then_kit = ("tests/test_a_slow_one.py", "tests/test_orders.py", "--sbtck-out", "o")
    proc = _in(project, "pytest", "-q", *slow_then_kit, env={"SBTCK_RUN_BUDGET_S": "2"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 passed" in proc.stdout
