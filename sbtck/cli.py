"""The ``sbtck`` command: run the suite, or serve an implementation over the protocol."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from sbtck import __version__, config, tags, workload_cli
from sbtck.errors import ConfigError, IUTSpecError, ResultsError, WorkloadSummaryError
from sbtck.reports import outfolder
from sbtck.resources import docs, kit_root, suite_ini, suite_module
from sbtck.visible import visible

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
# pytest options after -- that show something of pytest's and run no scenario: a run of none would read as a verdict
SHOWS_ONLY = frozenset(
    {"--fixtures", "--fixtures-per-test", "--funcargs", "--markers", "--help", "-h", "--version", "-V"}
    | {"--collect-only", "--collectonly", "--co", "--trace-config", "--setup-plan", "--setup-only", "--cache-show"}
)
# the plugin's options, which sbtck run sets from its own after checking them: given after -- they would bypass
# --out's checks and lock, and the settings' trust
KIT_OPTIONS = "--sbtck-"
# a tag expression is a few names; a longer one is refused before pytest's parser spends seconds on it
MAX_TAGS_CHARS = int(os.environ.get("SBTCK_MAX_TAGS_CHARS", "10000"))


def _pytest_options_refused(extra: list[str]) -> str | None:
    """Why the arguments after -- cannot be run by sbtck run, or None."""
    for arg in extra:
        name = arg.split("=", 1)[0]
        if name in SHOWS_ONLY:
            return f"{name} runs no scenario, so gives no verdict; run it through pytest itself (pytest {name})"
        if name.startswith(KIT_OPTIONS):
            own = name.removeprefix(KIT_OPTIONS)
            return f"{name} after -- is the kit's own option; write --{own} before --"
    return None


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    refused = _pytest_options_refused(extra)
    if refused is not None:
        print(f"sbtck: {refused}", file=sys.stderr)
        return EXIT_BAD_INPUT

    try:
        settings, source = config.load(Path.cwd(), Path(args.settings) if args.settings else None)
        if args.features:  # a team's features run under the pytest configuration found walking up: trusted too
            config.pytest_settings(Path.cwd())
    except ConfigError as exc:
        print(f"sbtck: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # a value given on the command line wins, an empty one too (--tags "" clears the settings' tags)
    chosen: dict[str, str | None] = {
        key: getattr(args, key) if getattr(args, key) is not None else settings.get(key) for key in config.KEYS
    }
    expression = chosen["tags"]
    if expression is not None and len(expression) > MAX_TAGS_CHARS:
        print(
            f"sbtck: --tags {expression[:40]!r}...: {len(expression)} characters; a tag expression is at most "
            f"{MAX_TAGS_CHARS} (SBTCK_MAX_TAGS_CHARS)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    # the project's folder: the settings file's, found walking up, as pytest finds its rootdir
    project = source.parent if source is not None else Path.cwd()
    out = Path(chosen["out"] or project / "out" / "report").resolve()
    if out.exists() and not out.is_dir():
        print(f"sbtck: --out {out} is a file; name a folder for the report", file=sys.stderr)
        return EXIT_BAD_INPUT
    foreign = outfolder.refused(out, outfolder.REPORT)
    if foreign:
        print(f"sbtck: --out {out}: {foreign}", file=sys.stderr)
        return EXIT_BAD_INPUT
    unwritable = _unwritable(out)
    if unwritable:  # found now, not after the whole run
        print(f"sbtck: --out {out}: cannot write there ({unwritable})", file=sys.stderr)
        return EXIT_BAD_INPUT
    # a second command there at once is refused, never left to replace or mix with this run's report
    with outfolder.locked(out) as taken:
        if not taken:
            print(f"sbtck: --out {out}: {outfolder.TAKEN}", file=sys.stderr)
            return EXIT_BAD_INPUT
        outfolder.claim(out, outfolder.REPORT)
        # whatever the run starts (implementations and the daemons they start, setsid and env -i ones too) stays
        # below the kit, and goes when the run ends, however it ends
        from sbtck.iut.remote import adopt_orphans, end_descendants

        adopt_orphans()
        try:
            return _run_suite(args, extra, chosen, out, source, project)
        finally:
            end_descendants()


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
    # a node id after -- (the report's rerun command, relative to the kit) replaces the whole suite; an option's
    # value that holds "::" (-W error::DeprecationWarning, --deselect FILE::TEST) is no node id
    nodes = set(node_ids(extra))
    extra = [
        str(root / arg) if i in nodes and (root / arg.split("::")[0]).is_file() else arg for i, arg in enumerate(extra)
    ]
    # The kit's features run under the kit's settings; a team's own (--features) under the team's pytest
    # configuration, its markers and options, as its own pytest would run them. Either way the kit adds what it
    # needs on the command line: its warnings silenced, the cache (--lf, --ff) in the project, not in the kit.
    ini = config.pytest_settings(Path.cwd()) if args.features else None
    pytest_args = [
        *([] if nodes else [str(suite_module())]),
        "-c",
        str(ini or suite_ini()),
        "--rootdir",
        str(ini.parent if ini else root),
        # without pytest's cache plugin (-p no:cacheprovider) there is no cache_dir to set, and pytest would warn
        *([] if _without_cache(extra) else ["-o", f"cache_dir={project / '.pytest_cache'}"]),
        "--sbtck-iut",
        chosen["iut"] or "reference",
        "--sbtck-out",
        str(out),
    ]
    if args.baseline:
        pytest_args += ["--sbtck-baseline", str(Path(args.baseline).resolve())]
    if args.dry_run:
        pytest_args.append("--sbtck-dry-run")
    if args.timeout is not None:
        try:
            seconds = float(args.timeout)
        except ValueError:
            seconds = 0.0
        if not 0 < seconds < float("inf"):
            print(f"sbtck: --timeout {args.timeout!r}: a number of seconds above 0, e.g. --timeout 30", file=sys.stderr)
            return EXIT_BAD_INPUT
        os.environ[config.REQUEST_TIMEOUT] = (
            f"{seconds:g}"  # read as the protocol's client is imported, in every worker
        )
    for key in ("profile", "expectations"):
        value = chosen[key]
        if value:
            pytest_args += [f"--sbtck-{key}", str(Path(value).resolve())]
    if chosen["tags"]:
        try:
            tags.expression(chosen["tags"])
        except ConfigError as exc:
            print(f"sbtck: {exc}; write e.g. '@ACT-06 or @ACT-07', 'not @informative'", file=sys.stderr)
            return EXIT_BAD_INPUT
        pytest_args.append(f"--sbtck-tags={chosen['tags']}")  # joined: pytest reads an argument starting @ as a file
    if source is not None:
        print(f"sbtck: settings from {source}")
        os.environ[config.SETTINGS_FILE] = str(source)  # the report names it
    # said before it starts: a program named by a file is not started unseen
    came_from = "from --iut" if args.iut else f"from {source}" if chosen["iut"] else "the default"
    print(visible(f"sbtck: implementation {chosen['iut'] or 'reference'} ({came_from})"))
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
    # the kit's warnings silenced after the user's arguments: a later -W wins, and -W error must not undo these
    quiet = [arg for module in ("sbtck", "pytest_bdd") for arg in ("-W", f"{ALREADY_IMPORTED} {module}:{REWRITE}")]
    code = int(pytest.main(pytest_args + extra + quiet, plugins=[collected]))
    if code == PYTEST_NO_TESTS and collected.scenarios:  # none applied: the kit's own line said "nothing ran"
        return EXIT_BAD_INPUT
    if code == PYTEST_NO_TESTS:
        chose = [f"--tags {chosen['tags']!r}"] if chosen["tags"] else []
        # every selection named, pytest's own after -- too: -k alone must not read as the tags' fault
        chose += [f"{arg} {after!r}" for arg, after in itertools.pairwise(extra) if arg in ("-k", "-m")]
        chose += [f"{arg[:2]} {arg[2:]!r}" for arg in extra if arg[:2] in ("-k", "-m") and len(arg) > 2]
        said = f"no scenario matches {' and '.join(chose)}" if chose else "no scenario ran"
        print(f"sbtck: {said}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if code in (PYTEST_USAGE, PYTEST_INTERRUPTED):
        return EXIT_BAD_INPUT
    if args.dry_run and code != EXIT_OK:  # a step that binds to nothing or a topology that does not load: the input's
        return EXIT_BAD_INPUT
    return code


# pytest's options after -- that take a value as the next argument: that value is never a node id
TAKES_VALUE = frozenset(
    {"-W", "--pythonwarnings", "--deselect", "-k", "-m", "-p", "-o", "--override-ini", "-c", "--config-file"}
    | {"--rootdir", "--basetemp", "--confcutdir", "--ignore", "--ignore-glob", "--junitxml", "--junit-xml"}
    | {"--log-file", "--log-level", "--durations", "--maxfail", "--tb", "-r", "-n", "--numprocesses", "--dist"}
    | {"--reruns", "--reruns-delay", "--only-rerun", "--import-mode", "--capture", "--color", "--sbtck-out"}
)


def _without_cache(args: list[str]) -> bool:
    """Do pytest's ARGS turn its cache plugin off (-p no:cacheprovider, -pno:cacheprovider)?"""
    return any(
        arg.removeprefix("-p").strip() == "no:cacheprovider" and (arg != "no:cacheprovider" or args[i - 1] == "-p")
        for i, arg in enumerate(args)
    )


def node_ids(args: list[str]) -> list[int]:
    """The positions in ARGS (pytest's, after --) of node ids (FILE::TEST): positional arguments holding "::",
    never the value of an option (-W error::DeprecationWarning, --deselect FILE::TEST, -k, -m)."""
    found: list[int] = []
    value_next = False
    for i, arg in enumerate(args):
        if value_next:
            value_next = False
        elif arg.startswith("-"):
            value_next = arg in TAKES_VALUE  # "--deselect=X" and "-Werror::X" carry their value themselves
        elif "::" in arg:
            found.append(i)
    return found


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
        foreign = outfolder.refused(out, outfolder.REPORT)
        if foreign:
            raise ResultsError(f"--out {out}: {foreign}")
        if not outfolder.hold(out):
            raise ResultsError(f"--out {out}: {outfolder.TAKEN}")
        outfolder.claim(out, outfolder.REPORT)

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
    "design": "design.md",
}


# made when asked, from the kit's own files
TOPOLOGIES = "topologies"


def _docs(args: argparse.Namespace) -> int:
    folder = docs()
    if args.name is None:
        for name, file in DOCUMENTS.items():
            print(f"{name:<13} {folder / file}")
        print(f"{TOPOLOGIES:<13} made from {kit_root() / 'fixtures' / 'topologies'}")
        return EXIT_OK
    if args.name == TOPOLOGIES:
        from sbtck import topology_doc

        sys.stdout.write(topology_doc.render())
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
        "failed unexpectedly. Settings may come from sbtck.toml or [tool.sbtck] in pyproject.toml, in the current "
        "folder or the nearest folder above it that has one (as pytest finds its rootdir; a pyproject.toml without "
        "[tool.sbtck] ends the search); the command line overrides them. Arguments after -- go to pytest unchanged.",
        epilog="examples:\n  sbtck run --iut 'cmd:node my-broker.js' --profile my-profile.yaml --out out/mine\n"
        "  sbtck run --tags 'ACT-09 or RTR-4' -- -x",
        formatter_class=Help,
    )
    run.add_argument("--iut", help="the implementation under test (default: reference); see `sbtck docs protocol`")
    run.add_argument("--profile", help="conformance profile file (default: the implementation's own values)")
    run.add_argument("--expectations", help="a YAML file listing the scenario ids expected to fail")
    run.add_argument(
        "--tags",
        help="which scenarios, as a tag expression in Cucumber's syntax ('@ACT-06 or @ACT-07', 'not @informative'; "
        "the @ may be left out); an empty one clears the settings' tags",
    )
    run.add_argument("--out", help="output folder (default: out/report)")
    run.add_argument(
        "--settings",
        metavar="FILE",
        help="this settings file (sbtck.toml, or a pyproject.toml with [tool.sbtck]), whoever owns it, instead of "
        "the one found walking up from the current folder",
    )
    run.add_argument("--features", help="run these .feature files or folders instead (e.g. workload reproducers)")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="check that every step binds and every topology loads; start no implementation, run nothing",
    )
    run.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="how long each request waits for the implementation's answer (default: 10; SBTCK_REQUEST_TIMEOUT)",
    )
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
        "(architecture), each topology's instances, queues and services (topologies). Without a name, lists them "
        "with where they are.",
        epilog="examples:\n  sbtck docs steps | less\n  sbtck docs schema > protocol.schema.json",
        formatter_class=Help,
    )
    documents.add_argument("name", nargs="?", choices=sorted([*DOCUMENTS, TOPOLOGIES]), help="which document")
    workload_cli.add_parser(commands, formatter_class=Help)
    args = parser.parse_args(argv)
    # SIGTERM (what timeout, CI runners and container stops send) ends a run as Ctrl-C does: a partial report
    # marked interrupted, the implementation's process group ended, the output folder telling the truth
    if args.command == "workload":  # takes the signals itself (workload_cli._stop)
        return workload_cli.run(args)
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
