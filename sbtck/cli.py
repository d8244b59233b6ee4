"""The ``sbtck`` command: run the suite, or serve an implementation over the protocol."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sbtck import __version__, config, workload_cli
from sbtck.errors import ConfigError, IUTSpecError, ResultsError, WorkloadSummaryError
from sbtck.resources import docs, kit_root, suite_ini, suite_module

# exit codes of every subcommand (the README's table)
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
# pytest's own, mapped onto the kit's
PYTEST_INTERRUPTED, PYTEST_USAGE, PYTEST_NO_TESTS = 2, 4, 5


class Help(argparse.HelpFormatter):
    """Wraps descriptions; keeps an epilog's example lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


# `sbtck run` imports the kit and pytest-bdd before pytest marks them, as installed plugins, for assertion rewriting
ALREADY_IMPORTED = "ignore:Module already imported so cannot be rewritten;"
REWRITE = "pytest.PytestAssertRewriteWarning"
RUN_LOCK = ".sbtck-run.lock"  # in --out, held while a run writes there
# pytest options after -- that show something of pytest's and run no scenario: a run of none would read as a verdict
SHOWS_ONLY = frozenset(
    {"--fixtures", "--fixtures-per-test", "--markers", "--help", "-h", "--version", "-V", "--setup-plan"}
    | {"--collect-only", "--co", "--trace-config"}
)


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    shown = next((arg for arg in extra if arg in SHOWS_ONLY), None)
    if shown is not None:
        print(
            f"sbtck: {shown} runs no scenario, so gives no verdict; run it through pytest itself (pytest {shown})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT

    try:
        settings, source = config.load(Path.cwd())
    except ConfigError as exc:
        print(f"sbtck: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    chosen: dict[str, str | None] = {key: getattr(args, key) or settings.get(key) for key in config.KEYS}
    # the project's folder: the settings file's, found walking up, as pytest finds its rootdir
    project = source.parent if source is not None else Path.cwd()
    out = Path(chosen["out"] or project / "out" / "report").resolve()
    if out.exists() and not out.is_dir():
        print(f"sbtck: --out {out} is a file; name a folder for the report", file=sys.stderr)
        return EXIT_BAD_INPUT
    unwritable = _unwritable(out)
    if unwritable:  # found now, not after the whole run
        print(f"sbtck: --out {out}: cannot write there ({unwritable})", file=sys.stderr)
        return EXIT_BAD_INPUT
    with _one_run_at_a_time(out) as taken:
        if not taken:
            print(
                f"sbtck: --out {out}: another sbtck run is writing its report there; wait, or name another --out",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        return _run_suite(args, extra, chosen, out, source, project)


@contextlib.contextmanager
def _one_run_at_a_time(out: Path) -> Iterator[bool]:
    """A lock on OUT for the run: a second run there at once is refused, never left to replace the first's report."""
    fd = os.open(out / RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # never through a planted link
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # the lock goes with it


def _run_suite(
    args: argparse.Namespace,
    extra: list[str],
    chosen: dict[str, str | None],
    out: Path,
    source: Path | None,
    project: Path,
) -> int:
    import pytest

    root = kit_root()
    # a node id after -- (the report's rerun command, relative to the kit) replaces the whole suite
    extra = [str(root / arg) if "::" in arg and (root / arg.split("::")[0]).is_file() else arg for arg in extra]
    # The kit's features run under the kit's settings; a team's own (--features) under the team's pytest
    # configuration, its markers and options, as its own pytest would run them. Either way the kit adds what it
    # needs on the command line: its warnings silenced, the cache (--lf, --ff) in the project, not in the kit.
    ini = config.pytest_settings(Path.cwd()) if args.features else None
    pytest_args = [
        *([] if any("::" in arg for arg in extra) else [str(suite_module())]),
        "-c",
        str(ini or suite_ini()),
        "--rootdir",
        str(ini.parent if ini else root),
        "-o",
        f"cache_dir={project / '.pytest_cache'}",
        *(arg for module in ("sbtck", "pytest_bdd") for arg in ("-W", f"{ALREADY_IMPORTED} {module}:{REWRITE}")),
        "--sbtck-iut",
        chosen["iut"] or "reference",
        "--sbtck-out",
        str(out),
    ]
    if args.baseline:
        pytest_args += ["--sbtck-baseline", str(Path(args.baseline).resolve())]
    for key in ("profile", "expectations"):
        value = chosen[key]
        if value:
            pytest_args += [f"--sbtck-{key}", str(Path(value).resolve())]
    if chosen["tags"]:
        wrong = _tag_expression_error(chosen["tags"])
        if wrong:
            print(
                f"sbtck: --tags {chosen['tags']!r}: {wrong}; write e.g. 'ACT-06 or ACT-07', 'not informative'",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        pytest_args += ["-m", chosen["tags"]]
    if source is not None:
        print(f"sbtck: settings from {source}")
        os.environ[config.SETTINGS_FILE] = str(source)  # the report names it
    if args.features:
        paths = [Path(p).resolve() for p in args.features.split(",")]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            print(f"sbtck: --features: no such file or folder: {', '.join(missing)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        unreadable = _unreadable_features(paths)
        if unreadable:
            print(f"sbtck: --features: {unreadable}", file=sys.stderr)
            return EXIT_BAD_INPUT
        os.environ["SBTCK_FEATURES"] = os.pathsep.join(str(p) for p in paths)
    collected = _Collected()
    code = int(pytest.main(pytest_args + extra, plugins=[collected]))
    if code == PYTEST_NO_TESTS and collected.scenarios:  # none applied: the kit's own line said "nothing ran"
        return EXIT_BAD_INPUT
    if code == PYTEST_NO_TESTS:
        tags = chosen["tags"]
        print(f"sbtck: no scenario matches --tags {tags!r}" if tags else "sbtck: no scenario ran", file=sys.stderr)
        return EXIT_BAD_INPUT
    if code in (PYTEST_USAGE, PYTEST_INTERRUPTED):
        return EXIT_BAD_INPUT
    return code


def _tag_expression_error(tags: str) -> str | None:
    """Why pytest's -m would refuse TAGS, said in the kit's words (not pytest's option name), or None."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pytest's parser moved: pytest says it itself
        return None
    try:
        Expression.compile(tags)
    except SyntaxError as exc:  # pytest 9
        return f"not a tag expression (at column {exc.offset}: {exc.msg})"
    except Exception as exc:  # pytest 8's ParseError
        return f"not a tag expression ({exc})"
    return None


class _Collected:
    """How many scenarios the session kept after the tags chose: none, or none that applied, is no verdict."""

    def __init__(self) -> None:
        self.scenarios = 0

    def pytest_collection_finish(self, session: Any) -> None:
        self.scenarios = len(session.items)


def _unwritable(out: Path) -> str | None:
    """Why the report could not be written to OUT, made if it is missing; None when it can."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _unreadable_features(paths: list[Path]) -> str | None:
    """The first .feature file that pytest-bdd could not parse, and why, in one line."""
    from pytest_bdd.parser import FeatureParser

    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*.feature")))]
    if not files:
        return f"no .feature file in {', '.join(map(str, paths))}"
    for path in files:
        try:
            feature = FeatureParser(str(path.parent), path.name).parse()
        except Exception as exc:  # the parser's errors have no common base; any of them makes the file unusable
            return f"{path}: not a feature file pytest-bdd can read ({type(exc).__name__}: {exc or 'empty'})"
        if not feature.scenarios:
            return f"{path}: no scenario in it" + _colonless(path)
    return None


def _colonless(path: Path) -> str:
    """Where a scenario's keyword misses its colon, which makes the line a description: said, with its number."""
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        words = line.strip().split(maxsplit=1)
        if words and words[0] in ("Scenario", "Example", "Scenario Outline") and not words[0].endswith(":"):
            return f"; line {number} reads {line.strip()[:80]!r}: write '{words[0]}:' with its colon"
    return " (a scenario begins with 'Scenario:')"


def _serve(args: argparse.Namespace) -> int:
    from sbtck.iut import serve
    from sbtck.iut.loader import factory_for

    try:
        factory = factory_for(args.iut)
        if args.stdio:
            serve.serve_stdio(factory)
        else:
            serve.serve_tcp(factory, args.tcp)
    except (IUTSpecError, ValueError) as exc:
        print(f"sbtck serve: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from sbtck.reports import baseline, cucumber, html, junit
    from sbtck.reports.publish import staged
    from sbtck.reports.results import read

    out = Path(args.out)
    try:
        for path in [*args.results, *([args.baseline] if args.baseline else [])]:
            if not Path(path).is_file():
                raise ResultsError(f"{path}: no such results file (sbtck run writes one under its --out)")
        own = [p for p in args.results if Path(p).resolve().parent == out.resolve()]
        if own:
            raise ResultsError(f"--out {out} is the folder of the run {own[0]}: its report would be overwritten")
        twice = next((p for i, p in enumerate(args.results) if Path(p).resolve() in _resolved(args.results[:i])), None)
        if twice is not None:
            raise ResultsError(f"{twice} is given twice: each run is one column of the page")
        runs = [read(Path(p)) for p in args.results]
        old = read(Path(args.baseline))[1] if args.baseline else None

        def make(folder: Path) -> None:
            html.build(
                [Path(p) for p in args.results],
                folder / "index.html",
                Path(args.workload) if args.workload else None,
                Path(args.baseline) if args.baseline else None,
            )
            cucumber.write([rec for _, records in runs for rec in records], folder / "cucumber.json")
            if len(runs) == 1:  # one run's test cases; of several, none, and no earlier report's left beside
                junit.write(*runs[0], folder / "junit.xml")

        # written whole or not at all: a full disk leaves the earlier page, never half of one
        staged(out, make, stale=("junit.xml",))
    except (ResultsError, WorkloadSummaryError) as exc:
        print(f"sbtck report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"sbtck report: --out {out}: cannot write the report ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    page = out / "index.html"
    print(f"sbtck report: {page}")
    if old is not None:
        changes = baseline.compare(old, runs[0][1])
        print(f"sbtck report: against the baseline {args.baseline}: {changes.summary()}")
        for change in changes.regressions:
            print(f"  regression: {change.id}: {change.before} -> {change.after}")
        if changes.regressions:
            return EXIT_FAILED
    return EXIT_OK


def _resolved(paths: list[str]) -> set[Path]:
    return {Path(p).resolve() for p in paths}


def _expectations(args: argparse.Namespace) -> int:
    from sbtck.reports.results import expectations_yaml, read

    try:
        run, records = read(Path(args.source))
    except ResultsError as exc:
        print(f"sbtck expectations: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(expectations_yaml(run, records, args.source))
    return EXIT_OK


# `sbtck docs NAME`: the kit's documents, by the names a reader would ask for
DOCUMENTS = {
    "steps": "steps.md",
    "protocol": "protocol.md",
    "schema": "protocol.schema.json",
    "implementing": "implementing.md",
    "changes": "changes.md",
    "architecture": "architecture.md",
}


def _docs(args: argparse.Namespace) -> int:
    folder = docs()
    if args.name is None:
        for name, file in DOCUMENTS.items():
            print(f"{name:<13} {folder / file}")
        return EXIT_OK
    sys.stdout.write((folder / DOCUMENTS[args.name]).read_text(encoding="utf-8"))
    return EXIT_OK


def _interrupted(signum: int, frame: Any) -> None:
    # what Ctrl-C would do first: PySpark's own handler cancels the running jobs, so that the driver can stop
    on_ctrl_c = signal.getsignal(signal.SIGINT)
    if callable(on_ctrl_c) and on_ctrl_c is not signal.default_int_handler:
        with contextlib.suppress(KeyboardInterrupt):
            on_ctrl_c(signal.SIGINT, frame)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["workload", "show"]:  # a reader of a finished job's folder: none of the job's options apply
        return workload_cli.show(argv[2:])
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    from sbtck.contract import PROTOCOL_VERSION

    parser = argparse.ArgumentParser(
        prog="sbtck",
        description="Service Broker compatibility kit: the conformance suite, the protocol server, reports and "
        "the randomized workload stage. Each command has --help with an example.",
        epilog="examples:\n  sbtck run --iut 'cmd:node my-broker.js' --out out/mine\n"
        "  sbtck report out/a/results.json out/b/results.json --out out/both",
        formatter_class=Help,
    )
    parser.add_argument("--version", action="version", version=f"sbtck {__version__} (protocol {PROTOCOL_VERSION})")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run the Gherkin suite against an implementation",
        description="Runs every scenario of the kit's features against the implementation under test and writes "
        "results.json, index.html, cucumber.json and junit.xml under --out. Exit status 0 only when no scenario "
        "failed unexpectedly. Settings may come from sbtck.toml or [tool.sbtck] in pyproject.toml in the current "
        "folder; the command line overrides them. Arguments after -- go to pytest unchanged.",
        epilog="examples:\n  sbtck run --iut 'cmd:node my-broker.js' --profile my-profile.yaml --out out/mine\n"
        "  sbtck run --tags 'ACT-09 or RTR-4' -- -x",
        formatter_class=Help,
    )
    run.add_argument("--iut", help="the implementation under test (default: reference); see `sbtck docs protocol`")
    run.add_argument("--profile", help="conformance profile file (default: the implementation's own values)")
    run.add_argument("--expectations", help="a YAML file listing the scenario ids expected to fail")
    run.add_argument("--tags", help="which scenarios, as a tag expression: 'ACT-06 or ACT-07', 'not informative'")
    run.add_argument("--out", help="output folder (default: out/report)")
    run.add_argument("--features", help="run these .feature files or folders instead (e.g. workload reproducers)")
    run.add_argument(
        "--baseline",
        metavar="OLD/results.json",
        help="an earlier run: changed scenarios come first in the report; exit status 1 on a regression",
    )
    serve = commands.add_parser(
        "serve",
        help="serve an in-process implementation over the JSON-lines protocol",
        description="Serves the reference engine (or any in-process implementation) over the protocol "
        "(`sbtck docs protocol`), on "
        "standard input and output or on a loopback TCP port.",
        epilog="examples:\n  sbtck serve --stdio\n  sbtck serve --tcp 127.0.0.1:4022 --iut python:mybroker.kit:make",
        formatter_class=Help,
    )
    serve.add_argument("--iut", default="reference", help="'reference' (default), 'python:MODULE:FACTORY', ...")
    how = serve.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="one session on standard input and output")
    how.add_argument("--tcp", metavar="127.0.0.1:PORT", help="sessions on a loopback TCP port")
    report = commands.add_parser(
        "report",
        help="build one report from one or more results.json files",
        description="Builds one self-contained index.html (and cucumber.json) from the results.json files of "
        "earlier runs, with a rules-by-run matrix when there are several.",
        epilog="examples:\n  sbtck report out/a/results.json out/b/results.json --out out/both\n"
        "  sbtck report out/new/results.json --baseline out/old/results.json --out out/changes",
        formatter_class=Help,
    )
    report.add_argument("results", nargs="+", metavar="RESULTS.json", help="results of sbtck run, one per run")
    report.add_argument("--out", default="out/combined", help="output folder (default: out/combined)")
    report.add_argument("--workload", help="a workload summary JSON of the Spark stage to include")
    report.add_argument(
        "--baseline",
        metavar="OLD/results.json",
        help="an earlier run to compare the first with; exit 1 on a regression",
    )
    expectations = commands.add_parser(
        "expectations",
        help="write an expectations file from a run: the scenarios that do not work yet",
        description="Prints, as YAML, the ids of the scenarios that failed, erred or were expected failures in "
        "a run, so that a partial implementation can run with --expectations and see its progress as "
        "unexpected passes.",
        epilog="example:\n  sbtck expectations --from out/report/results.json > known-failures.yaml\n"
        "  sbtck run --expectations known-failures.yaml",
        formatter_class=Help,
    )
    expectations.add_argument(
        "--from", dest="source", required=True, metavar="RUN/results.json", help="the results of sbtck run"
    )
    documents = commands.add_parser(
        "docs",
        help="print one of the kit's documents (they travel with it)",
        description="Prints one of the documents the kit carries: the step vocabulary (steps), the protocol an "
        "implementation speaks (protocol) and its JSON Schema (schema), what an implementation must do to pass "
        "(implementing), what each protocol version asks beyond the last (changes), the map of the kit's code "
        "(architecture). Without a name, lists them "
        "with where they are.",
        epilog="examples:\n  sbtck docs steps | less\n  sbtck docs schema > protocol.schema.json",
        formatter_class=Help,
    )
    documents.add_argument("name", nargs="?", choices=sorted(DOCUMENTS), help="which document")
    workload_cli.add_parser(commands, formatter_class=Help)
    args = parser.parse_args(argv)
    # SIGTERM (what timeout, CI runners and container stops send) ends a run as Ctrl-C does: a partial report
    # marked interrupted, the implementation's process group ended, the output folder telling the truth
    signal.signal(signal.SIGTERM, _interrupted)
    if args.command == "workload":
        return workload_cli.run(args)
    if args.command == "run":
        return _run(args, extra)
    if args.command == "report":
        return _report(args)
    if args.command == "expectations":
        return _expectations(args)
    if args.command == "docs":
        return _docs(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
