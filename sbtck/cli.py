"""The ``sbtck`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "steps" / "test_features.py"

EXIT_NO_SCENARIO = 5
EXIT_USAGE = 4


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    import pytest

    out = Path(args.out).resolve()
    pytest_args = [
        str(SUITE),
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(ROOT),
        "--iut",
        args.iut,
        "--sbtck-out",
        str(out),
        "--junitxml",
        str(out / "junit.xml"),
    ]
    if args.profile:
        pytest_args += ["--profile", str(Path(args.profile).resolve())]
    if args.tags:
        pytest_args += ["-m", args.tags]
    code = int(pytest.main(pytest_args + extra))
    if code == EXIT_NO_SCENARIO:
        print(
            f"sbtck: no scenario matches --tags {args.tags!r}" if args.tags else "sbtck: no scenario ran",
            file=sys.stderr,
        )
        return 2
    if code == EXIT_USAGE:
        return 2
    return code


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
        "unexpectedly. Arguments after -- go to pytest unchanged.",
    )
    run.add_argument("--iut", default="reference", help="'reference' (default) or 'python:MODULE:FACTORY'")
    run.add_argument("--profile", help="conformance profile file (default: the implementation's own values)")
    run.add_argument("--tags", help="which scenarios, as a tag expression: 'ACT-06 or ACT-07', 'not informative'")
    run.add_argument("--out", default="out/report", help="output folder (default: out/report)")
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args, extra)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
