"""A short ``sbtck workload`` whose driver maps Spark's classes from the kept archive, beside one that reads the jars.

A short job is mostly Spark starting: the driver's JVM reads some ten
thousand classes out of two hundred jars before the first task runs
(``sbtck.workloads.sparkling.ClassArchive``). The archive is made first, in
a cache folder of this run's own, by a run that keeps it (how long that
first run takes is printed too); then runs with it and without it take
turns, so that a machine busier in one moment slows both alike, and each
keeps its best. Times are the whole command's, as a user waits for it.

    python -m bench.bench_classes [--worlds 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sbtck.engine.compiling import build
from sbtck.workloads.sparkling import CACHE_SETTING, CLASSES_SETTING

ROOT = Path(__file__).resolve().parents[1]


def seconds(worlds: int, out: Path, env: dict[str, str]) -> tuple[float, str]:
    argv = [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[2]", "--worlds", str(worlds)]
    start = time.perf_counter()
    done = subprocess.run(
        [*argv, "--out", str(out)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"sbtck workload failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return took, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=200, help="worlds per run (default 200)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.worlds <= 0 or args.rounds <= 0:
        parser.error("--worlds and --rounds must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        kept = {CACHE_SETTING: str(Path(tmp) / "cache"), CLASSES_SETTING: "on"}
        making, said = seconds(args.worlds, Path(tmp) / "out", kept)
        if "kept in" not in said:
            raise SystemExit(f"the first run kept no class archive:\n{said[-2000:]}")
        size = next((Path(tmp) / "cache").rglob("*.jsa")).stat().st_size
        ways = {"reads the jars": {CLASSES_SETTING: "off"}, "maps the archive": kept}
        best = dict.fromkeys(ways, float("inf"))
        for _ in range(args.rounds):
            for kind, env in ways.items():
                best[kind] = min(best[kind], seconds(args.worlds, Path(tmp) / "out", env)[0])
    print(f"sbtck workload --worlds {args.worlds} --master local[2], best of {args.rounds} runs each")
    print(f"engine: {build()}")
    print(f"first run, making the archive : {making:6.1f} s  ({size / 2**20:,.0f} MiB kept)")
    for kind, took in best.items():
        print(f"driver {kind:<23}: {took:6.1f} s")
    print(f"mapped / read                 : {best['maps the archive'] / best['reads the jars']:.2f}")


if __name__ == "__main__":
    main()
