"""The ``sbtck`` command: run the suite, or serve an implementation over the protocol."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sbtck import config, workload_cli

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "steps" / "test_features.py"

EXIT_NO_SCENARIO = 5
EXIT_USAGE = 4


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    import pytest

    try:
        settings, source = config.load(Path.cwd())
    except config.ConfigError as exc:
        print(f"sbtck: {exc}", file=sys.stderr)
        return 2
    chosen: dict[str, str | None] = {key: getattr(args, key) or settings.get(key) for key in config.KEYS}
    out = Path(chosen["out"] or "out/report").resolve()
    # a node id after -- (the report's rerun command) replaces the whole suite
    extra = [str(ROOT / arg) if "::" in arg and (ROOT / arg.split("::")[0]).is_file() else arg for arg in extra]
    pytest_args = [
        *([] if any("::" in arg for arg in extra) else [str(SUITE)]),
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(ROOT),
        "--iut",
        chosen["iut"] or "reference",
        "--sbtck-out",
        str(out),
        "--junitxml",
        str(out / "junit.xml"),
    ]
    for key in ("profile", "expectations"):
        value = chosen[key]
        if value:
            pytest_args += [f"--{key}", str(Path(value).resolve())]
    if chosen["tags"]:
        pytest_args += ["-m", chosen["tags"]]
    if source is not None:
        print(f"sbtck: settings from {source}")
    if args.features:
        paths = [Path(p).resolve() for p in args.features.split(",")]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            print(f"sbtck: --features: no such file or folder: {', '.join(missing)}", file=sys.stderr)
            return 2
        os.environ["SBTCK_FEATURES"] = os.pathsep.join(str(p) for p in paths)
    code = int(pytest.main(pytest_args + extra))
    if code == EXIT_NO_SCENARIO:
        tags = chosen["tags"]
        print(f"sbtck: no scenario matches --tags {tags!r}" if tags else "sbtck: no scenario ran", file=sys.stderr)
        return 2
    if code == EXIT_USAGE:
        return 2
    return code


def _serve(args: argparse.Namespace) -> int:
    from iut import serve
    from iut.loader import IUTSpecError, factory_for

    try:
        factory = factory_for(args.iut)
        if args.stdio:
            serve.serve_stdio(factory)
        else:
            serve.serve_tcp(factory, args.tcp)
    except (IUTSpecError, ValueError) as exc:
        print(f"sbtck serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


def _report(args: argparse.Namespace) -> int:
    from fixtures.results import read
    from reports import cucumber, html, workload

    out = Path(args.out)
    try:
        for path in args.results:
            if not Path(path).is_file():
                raise ValueError(f"{path}: no such results file (sbtck run writes one under its --out)")
        page = html.build(
            [Path(p) for p in args.results], out / "index.html", Path(args.workload) if args.workload else None
        )
        cucumber.write([rec for p in args.results for rec in read(Path(p))[1]], out / "cucumber.json")
    except (ValueError, KeyError, workload.WorkloadSummaryError) as exc:
        print(f"sbtck report: {exc}", file=sys.stderr)
        return 2
    print(f"sbtck report: {page}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(prog="sbtck", description="Service Broker compatibility kit")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run the Gherkin suite against an implementation",
        description="Runs every scenario of features/ against the implementation under test and writes "
        "results.json, index.html and junit.xml under --out. Exit status 0 only when no scenario failed "
        "unexpectedly. Settings may come from sbtck.toml or [tool.sbtck] in pyproject.toml in the current "
        "folder; the command line overrides them. Arguments after -- go to pytest unchanged.",
    )
    run.add_argument("--iut", help="the implementation under test (default: reference); see docs/protocol.md")
    run.add_argument("--profile", help="conformance profile file (default: the implementation's own values)")
    run.add_argument("--expectations", help="a YAML file listing the scenario ids expected to fail")
    run.add_argument("--tags", help="which scenarios, as a tag expression: 'ACT-06 or ACT-07', 'not informative'")
    run.add_argument("--out", help="output folder (default: out/report)")
    run.add_argument("--features", help="run these .feature files or folders instead (e.g. workload reproducers)")
    serve = commands.add_parser("serve", help="serve an in-process implementation over the JSON-lines protocol")
    serve.add_argument("--iut", default="reference", help="'reference' (default), 'python:MODULE:FACTORY', ...")
    how = serve.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="one session on standard input and output")
    how.add_argument("--tcp", metavar="127.0.0.1:PORT", help="sessions on a loopback TCP port")
    report = commands.add_parser("report", help="build one report from one or more results.json files")
    report.add_argument("results", nargs="+", metavar="RESULTS.json", help="results of sbtck run, one per run")
    report.add_argument("--out", default="out/combined", help="output folder (default: out/combined)")
    report.add_argument("--workload", help="a workload summary JSON of the Spark stage to include")
    workload_cli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "workload":
        return workload_cli.run(args)
    if args.command == "run":
        return _run(args, extra)
    if args.command == "report":
        return _report(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
