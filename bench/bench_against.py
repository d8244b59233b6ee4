"""This checkout's engine and stage beside another revision's, in one run: messages/s and worlds/s, and the ratio.

    python -m bench.bench_against REV [--compiled] [--rounds N] [--worlds W] [--messages M]

REV is checked out in a temporary worktree (and, with ``--compiled``, both
trees are built with mypyc, as scripts/compile.sh builds one). Each round
runs, in fresh processes taking turns, bench_throughput's SEND -> queue ->
RECEIVE loop on the engine and the stage's check of W worlds against the
reference (check_seeds, the work of each Spark task); the best of the rounds
of each side is compared. What a change costs in speed is said as these
ratios: issue 35 asked for no more than 5% slower.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEASURE = """
import json, sys, time
from sbtck.engine.compiling import build
from bench.bench_throughput import engine_run
from sbtck.iut.loader import factory_for
from sbtck.workloads.stage import check_seeds
messages, worlds = int(sys.argv[1]), int(sys.argv[2])
engine_run(1000, 10)
start = time.process_time(); engine_run(messages, 10); engine_s = time.process_time() - start
list(check_seeds(range(50), factory_for("reference"), False, 5))
start = time.process_time(); rows = list(check_seeds(range(worlds), factory_for("reference"), False, 5))
stage_s = time.process_time() - start
assert len(rows) == worlds
print(json.dumps({"build": build(), "messages_s": messages / engine_s, "worlds_s": worlds / stage_s}))
"""


def _run(tree: Path, argv: list[str], **env: str) -> str:
    """ARGV run with this Python in TREE, its standard output; a failure ends the benchmark with the error."""
    done = subprocess.run(
        [sys.executable, *argv], cwd=tree, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{argv[:2]} in {tree} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _compile(tree: Path) -> None:
    _run(tree, ["setup.py", "-q", "build_ext", "--inplace"], SBTCK_MYPYC="1")


def _measure(tree: Path, messages: int, worlds: int) -> dict[str, object]:
    out = _run(tree, ["-c", MEASURE, str(messages), str(worlds)], PYTHONPATH=str(tree))
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the revision to compare with (a commit, a branch, HEAD~3)")
    parser.add_argument("--compiled", action="store_true", help="build both trees with mypyc first")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worlds", type=int, default=1500)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), args.rev], cwd=ROOT, check=True)
        here = Path(tmp) / "here"
        subprocess.run(["bash", str(ROOT / "scripts" / "clean-copy.sh"), str(here)], check=True)
        try:
            if args.compiled:
                _compile(base)
                _compile(here)
            best: dict[str, dict[str, float]] = {"base": {}, "here": {}}
            builds: dict[str, object] = {}
            for _ in range(args.rounds):
                for name, tree in (("base", base), ("here", here)):
                    got = _measure(tree, args.messages, args.worlds)
                    builds[name] = got["build"]
                    for key in ("messages_s", "worlds_s"):
                        best[name][key] = max(best[name].get(key, 0.0), float(str(got[key])))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    print(f"{args.rev} against this checkout, best of {args.rounds} rounds each, taking turns")
    print(f"builds: {args.rev}: {builds['base']}; this checkout: {builds['here']}")
    for key, what in (
        ("messages_s", "engine, messages/s (bench_throughput)"),
        ("worlds_s", "stage, worlds/s (check_seeds)"),
    ):
        b, h = best["base"][key], best["here"][key]
        print(f"{what:<40} {args.rev}: {b:9.1f}  here: {h:9.1f}  here / {args.rev}: {h / b:.3f}")


if __name__ == "__main__":
    main()
