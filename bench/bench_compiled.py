"""The optional mypyc build (scripts/compile.sh) beside plain Python, in one run.

Two copies of this checkout are made in a temporary folder, one compiled
(about 40 s), and each checks the same worlds of the workload stage and runs
bench_throughput's SEND -> RECEIVE loop in a process of its own. The copies
take turns and each keeps its best round, in CPU time. Printed: the cost of
a world and messages per second for each, and the compiled build's factor.

    python -m bench.bench_compiled [--worlds 2000] [--messages 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _copy(to: Path) -> None:
    """The checkout's files, without compiled modules a developer may have built in place (scripts/clean-copy.sh,
    as the CI checks copy it)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "clean-copy.sh"), str(to)], check=True)


def _child(worlds: int, messages: int) -> None:
    from bench.bench_throughput import engine_run
    from sbtck.engine.compiling import compiled_modules
    from sbtck.iut.loader import factory_for
    from sbtck.workloads.stage import check_seeds

    start = time.process_time()
    rows = list(check_seeds(range(worlds), factory_for("reference"), False, 5))
    check_s = time.process_time() - start
    start = time.process_time()
    engine_run(messages, 10)
    send_s = time.process_time() - start
    # the same worlds must give the same traces on both builds, or the factor compares two different things
    traces = hashlib.sha256("".join(str(r["trace_hash"]) for r in rows).encode()).hexdigest()
    print(json.dumps({"check_s": check_s, "send_s": send_s, "compiled": len(compiled_modules()), "traces": traces}))


def _measure(tree: Path, worlds: int, messages: int) -> dict[str, object]:
    argv = [
        sys.executable,
        "-m",
        "bench.bench_compiled",
        "--child",
        "--worlds",
        str(worlds),
        "--messages",
        str(messages),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the measurement in {tree} failed:\n{out.stderr[-2000:]}")
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=2000, help="worlds of 5 conversations per round")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worlds <= 0 or args.messages <= 0 or args.rounds <= 0:
        parser.error("--worlds, --messages and --rounds must be positive")
    if args.child:
        _child(args.worlds, args.messages)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"plain Python": Path(tmp) / "plain", "compiled": Path(tmp) / "compiled"}
        for tree in trees.values():
            _copy(tree)
        build = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=trees["compiled"],
            env={**os.environ, "SBTCK_MYPYC": "1"},
            capture_output=True,
            text=True,
        )
        if build.returncode != 0:
            raise SystemExit(f"the mypyc build failed:\n{build.stdout[-2000:]}{build.stderr[-2000:]}")
        best: dict[str, dict[str, float]] = {name: {"check_s": 1e9, "send_s": 1e9} for name in trees}
        seen: dict[str, dict[str, object]] = {}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                seen[name] = result = _measure(tree, args.worlds, args.messages)
                for key in best[name]:
                    best[name][key] = min(best[name][key], float(str(result[key])))
    if seen["plain Python"]["compiled"] != 0 or seen["compiled"]["compiled"] == 0:
        raise SystemExit(f"the copies are not what they should be: {seen}")
    if seen["plain Python"]["traces"] != seen["compiled"]["traces"]:
        raise SystemExit(f"the two builds gave different traces for the same worlds: {seen}")
    print(f"{args.worlds} worlds of 5 conversations, {args.messages} messages; best of {args.rounds} rounds")
    for name in trees:
        per_world = best[name]["check_s"] / args.worlds * 1000
        rate = args.messages / best[name]["send_s"]
        modules = seen[name]["compiled"]
        print(f"{name:13}: {per_world:6.3f} ms/world  {rate:10,.0f} messages/s  ({modules} modules compiled)")
    plain, compiled = best["plain Python"], best["compiled"]
    print(f"compiled / plain: {plain['check_s'] / compiled['check_s']:.2f}x worlds, ", end="")
    print(f"{plain['send_s'] / compiled['send_s']:.2f}x messages")


if __name__ == "__main__":
    main()
