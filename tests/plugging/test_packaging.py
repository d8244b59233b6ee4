"""The installable kit: one import name, data in the package, the pytest plugin by entry point, the conventions.

The full round trip (the wheel in a fresh virtual environment, run from an
empty folder, with PyPI's fixtures, steps and reports beside it) is
scripts/check-wheel.sh, which CI runs; these tests check the same promises
from the checkout's own environment.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from sbtck import __version__, cli
from tests.helpers import ROOT

KIT_FOLDERS = ("engine", "iut", "steps", "fixtures", "reports", "workloads", "docs")
PACKAGE_DATA = (
    "sbtck/features/activation/05_internal_activation.feature",
    "sbtck/features/routing/02_matching.feature",
    "sbtck/features/periodic/01_timer.feature",
    "sbtck/spec/rules.yaml",
    "sbtck/fixtures/topologies/routing.yaml",
    "sbtck/engine/profile.yaml",
    "sbtck/steps/suite.ini",
    "sbtck/steps/test_features.py",
    "sbtck/py.typed",
    "sbtck/docs/steps.md",
    "sbtck/docs/protocol.md",
    "sbtck/docs/protocol.schema.json",
    "sbtck/docs/implementing.md",
    "sbtck/docs/changes.md",
    "sbtck/docs/architecture.md",
    "sbtck/docs/design.md",
)


def _python(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # no PYTHONPATH: the kit is found as installed, never through the checkout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


# what a build must not see: setuptools' build/ keeps modules deleted since, and would ship them
NOT_SOURCES = (".venv", ".git", "out", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("src") / "sbtck"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (found,) = dist.glob("sbtck-*.whl")
    return found


def test_the_wheel_has_one_top_level_name(wheel: Path) -> None:
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"sbtck", f"sbtck-{__version__}.dist-info"}


def test_the_wheel_carries_features_catalogue_topologies_and_profile(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(PACKAGE_DATA) <= names
    features = {n for n in names if n.endswith(".feature")}
    assert len(features) == len(list((ROOT / "features").rglob("*.feature")))
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)


def test_the_wheel_carries_every_template_style_and_script_of_the_report_page(wheel: Path) -> None:
    """The page is drawn from package templates (sbtck/reports/templates/): a wheel without one cannot draw it."""
    names = set(zipfile.ZipFile(wheel).namelist())
    kit = ROOT / "sbtck" / "reports"
    shipped = {
        f"sbtck/reports/{p.relative_to(kit)}" for folder in ("templates", "static") for p in (kit / folder).iterdir()
    }
    assert len(shipped) > 8 and shipped <= names, sorted(shipped - names)


def test_the_wheel_registers_the_pytest_plugin_the_command_and_the_reference(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        declared = z.read(f"sbtck-{__version__}.dist-info/entry_points.txt").decode()
    assert "[pytest11]\nsbtck = sbtck.plugin" in declared
    assert "sbtck = sbtck.cli:main" in declared
    assert "reference = sbtck.iut.reference:reference" in declared


def test_the_core_needs_no_spark_and_the_extras_are_declared(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(f"sbtck-{__version__}.dist-info/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert not any("pyspark" in r or "testcontainers" in r for r in core), core
    assert any(r.startswith("pyspark") and 'extra == "spark"' in r for r in requires)
    assert any(r.startswith("testcontainers") and 'extra == "containers"' in r for r in requires)


def test_the_installed_plugin_is_the_entry_point() -> None:
    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "sbtck"]
    assert plugin.value == "sbtck.plugin"


def _imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_no_code_imports_the_folders_by_their_top_level_names() -> None:
    """engine, iut, ... are importable only as sbtck.engine, sbtck.iut, ...: a second copy would split state."""
    sources = [p for p in ROOT.rglob("*.py") if not {".venv", "out", "build"} & set(p.relative_to(ROOT).parts)]
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: import {name}"
        for path in sources
        for line, name in _imports(path)
        if name.split(".")[0] in KIT_FOLDERS
    ]
    assert not wrong, "write `from sbtck.X import ...`:\n" + "\n".join(wrong)


def test_kit_code_finds_its_data_through_the_package_not_its_own_file() -> None:
    kit = [ROOT / "sbtck", *(ROOT / folder for folder in KIT_FOLDERS)]
    offenders = [
        str(p.relative_to(ROOT))
        for folder in kit
        for p in folder.glob("*.py")
        if not p.is_symlink() and "__file__" in p.read_text()
    ]
    assert not offenders, offenders


def test_the_folders_are_the_packages_subpackages() -> None:
    for folder in (*KIT_FOLDERS, "features", "spec"):
        link = ROOT / "sbtck" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), folder


def test_version_with_python_m_and_the_command(tmp_path: Path) -> None:
    from sbtck.contract import PROTOCOL_VERSION

    proc = _python("-m", "sbtck", "--version", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"sbtck {__version__} (protocol {PROTOCOL_VERSION})"


@pytest.mark.parametrize("command", ["run", "serve", "report", "workload", "expectations", "docs"])
def test_every_subcommand_has_help_with_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "example" in text and f"sbtck {command} " in text.split("example", 1)[1]


def test_the_distribution_describes_itself(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(f"sbtck-{__version__}.dist-info/METADATA").decode()
    head, _, body = metadata.partition("\n\n")
    fields = [line.split(":", 1)[0] for line in head.splitlines()]
    assert {"Summary", "License", "Author", "Keywords", "Requires-Python", "Description-Content-Type"} <= set(fields)
    assert fields.count("Classifier") >= 10 and "Classifier: Framework :: Pytest" in head
    assert body.startswith("# sbtck - the Service Broker compatibility kit")  # the long description: the README


def test_the_documents_travel_with_the_kit_and_the_command_prints_them(tmp_path: Path) -> None:
    listed = _python("-m", "sbtck", "docs", cwd=tmp_path)
    assert listed.returncode == 0
    names = dict(line.split(None, 1) for line in listed.stdout.splitlines())
    assert set(names) == {*cli.DOCUMENTS, cli.TOPOLOGIES}
    assert all(Path(names[name]).is_file() for name in cli.DOCUMENTS)
    for name, file in cli.DOCUMENTS.items():
        shown = _python("-m", "sbtck", "docs", name, cwd=tmp_path)
        assert shown.returncode == 0 and shown.stdout == (ROOT / "docs" / file).read_text()
    said = _python("-m", "sbtck", "run", "--help", cwd=tmp_path).stdout
    assert "sbtck docs protocol" in said


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("sbtck.steps.phrases_doc", "steps.md"),
        ("sbtck.iut.protocol_doc", "protocol.md"),
        ("sbtck.iut.schema", "protocol.schema.json"),
        ("sbtck.catalogue_doc", "implementing.md"),
    ],
)
def test_every_generator_writes_its_document_by_default_and_where_told(module: str, name: str, tmp_path: Path) -> None:
    """Each generator makes the kit's own document from any folder: to a path given, to standard output for -,
    and, by default, to the kit's docs/ (not run here: that would write the checkout)."""
    printed = _python("-m", module, "-", cwd=tmp_path)
    assert printed.returncode == 0 and printed.stdout == (ROOT / "docs" / name).read_text()
    written = _python("-m", module, str(tmp_path / name), cwd=tmp_path)
    assert written.returncode == 0 and (tmp_path / name).read_text() == printed.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_the_readme_counts_the_scenarios_there_are() -> None:
    scenarios = [
        (path, line)
        for path in (ROOT / "features").rglob("*.feature")
        for line in path.read_text().splitlines()
        if line.strip().startswith(("Scenario:", "@"))
    ]
    informative, total, tagged = 0, 0, False
    for _, line in scenarios:
        if line.strip().startswith("@"):
            tagged = "@informative" in line.split()
            continue
        total += 1
        informative += tagged
        tagged = False
    readme = (ROOT / "README.md").read_text()
    words = {2: "two", 3: "three"}
    assert (
        f"checked by {total - informative} scenarios; {words.get(informative, informative)} more are @informative"
        in readme
    )


def test_the_readme_exit_code_table_matches_the_command() -> None:
    readme = (ROOT / "README.md").read_text()
    for code in (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_BAD_INPUT, cli.EXIT_INTERNAL):
        assert f"\n| {code} |" in readme, f"exit code {code} is missing from the README's table"


def test_workload_without_pyspark_names_the_extra(tmp_path: Path) -> None:
    # sys.modules[name] = None is how Python spells "this module cannot be imported"
    code = "import sys; sys.modules['pyspark'] = None; from sbtck.cli import main; sys.exit(main())"
    proc = _python("-c", code, "workload", "--worlds", "1", "--out", str(tmp_path / "w"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "sbtck workload: PySpark is not installed; install the spark extra: pip install 'sbtck[spark]'"
    ]
    assert not (tmp_path / "w").exists()


def test_pytest_pyargs_runs_the_kit_suite_from_an_empty_folder(tmp_path: Path) -> None:
    proc = _python("-m", "pytest", "--pyargs", "sbtck", "-q", "-p", "no:cacheprovider", "-m", "ACT-10", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_example_user_project_runs_the_kit_scenarios_and_its_own(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "user-project", project)
    proc = _python("-m", "pytest", "-q", "--sbtck-out", "out", cwd=project)
    assert proc.returncode == 0, proc.stdout[-3000:]
    scenarios = json.loads((project / "out" / "results.json").read_text())["scenarios"]
    ids = {s["id"]: s["status"] for s in scenarios}
    kit = [i for i in ids if i.startswith("features/activation/")]
    assert ids["features/orders.feature::[1] Orders are taken by two procedures at most"] == "passed"
    assert len(kit) >= 40 and all(ids[i] == "passed" for i in kit)
    kit_scenarios = sum(
        line.lstrip().startswith("Scenario:") for f in (ROOT / "features").rglob("*.feature") for line in f.open()
    )
    assert len(ids) == kit_scenarios + 1


def test_a_rerun_node_id_is_relative_to_the_installed_kit(tmp_path: Path) -> None:
    first = _python("-m", "sbtck", "run", "--tags", "ACT-13", "--out", "a", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-2000:]
    scenario = json.loads((tmp_path / "a" / "results.json").read_text())["scenarios"][0]
    node = scenario["rerun"].split(" -- ")[1].strip("'")
    assert node.startswith("steps/test_features.py::")
    again = _python("-m", "sbtck", "run", "--out", "b", "--", node, cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:]
    rerun = json.loads((tmp_path / "b" / "results.json").read_text())["scenarios"]
    assert [s["id"] for s in rerun] == [scenario["id"]]
