"""The workload stage on Spark local[2] beside multiprocessing.Pool(2) checking the same worlds, in one run.

The Spark side is the whole job as a user runs it (``sbtck workload``:
session start, tasks, Parquet, aggregates); the pool only checks the
worlds and counts them. The pool runs before and after Spark, and the ratio
is Spark's throughput over the mean of the two: on a shared machine the
speed of the same run drifts by a tenth within minutes, and a pool run only
after Spark read that drift as Spark's cost (0.84 and 1.04 in one hour).
The peak memory is that of the Spark process tree (driver, JVM, workers),
each process counting its proportional set size (bench/treesize.py says why).

    python -m bench.bench_workload [--conversations 1000000] [--iut SPEC]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

from bench.treesize import PeakSampler
from sbtck.engine.compiling import build
from sbtck.workloads.sparkling import class_archive

ROOT = Path(__file__).resolve().parents[1]
PER_WORLD = 5
CHUNK = 2500


def _check_chunk(task: tuple[int, int, str]) -> tuple[int, int]:
    from sbtck.iut.loader import factory_for
    from sbtck.workloads.stage import check_seeds

    first, count, iut = task
    rows = list(check_seeds(range(first, first + count), factory_for(iut), iut != "reference", PER_WORLD))
    return len(rows), sum(r["conversations"] for r in rows)


def pool_run(worlds: int, iut: str) -> tuple[float, int, int]:
    tasks = [(first, min(CHUNK, worlds - first), iut) for first in range(0, worlds, CHUNK)]
    start = time.perf_counter()
    with Pool(2) as pool:
        done = pool.map(_check_chunk, tasks, chunksize=1)
    return time.perf_counter() - start, sum(d[0] for d in done), sum(d[1] for d in done)


def spark_run(worlds: int, iut: str, out: Path) -> tuple[float, PeakSampler, dict[str, object]]:
    argv = [sys.executable, "-m", "sbtck.cli", "workload", "--master", "local[2]", "--worlds", str(worlds)]
    argv += ["--iut", iut, "--out", str(out), "--conversations", str(PER_WORLD)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE)
    with PeakSampler(proc.pid) as memory:
        output, _ = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sbtck workload failed ({proc.returncode}):\n{output.decode()[-2000:]}")
    return wall, memory, json.loads((out / "summary.json").read_text())


def driver_classes(out: Path) -> str:
    """Whether the timed run's driver maps the kept class archive (made now, as a user's first run makes it)."""
    classes = class_archive()
    if classes is None:
        return "read from the jars (no class archive: SBTCK_SPARK_CLASSES or no cache folder)"
    if classes.making is not None:
        classes.release()
        # every run of a user's but the first maps it: the figure is of such a run
        spark_run(1, "reference", out)
        classes = class_archive()
    if classes is None or classes.making is not None:
        return "read from the jars (the class archive could not be made)"
    return f"mapped from {classes.path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=50_000, help="conversations in all (default 50,000)")
    parser.add_argument("--iut", default="reference")
    args = parser.parse_args()
    if args.conversations < PER_WORLD:
        parser.error(f"--conversations must be at least {PER_WORLD}")
    worlds = args.conversations // PER_WORLD
    with tempfile.TemporaryDirectory() as tmp:
        classes = driver_classes(Path(tmp) / "first")
        before_s, pool_worlds, pool_conversations = pool_run(worlds, args.iut)
        spark_s, memory, summary = spark_run(worlds, args.iut, Path(tmp) / "out")
        after_s, _, _ = pool_run(worlds, args.iut)
    pool_s = (before_s + after_s) / 2
    conversations = int(str(summary["conversations"]))
    assert summary["worlds"] == pool_worlds == worlds and conversations == pool_conversations
    print(f"worlds: {worlds:,}, conversations: {conversations:,}, implementation: {args.iut}")
    print(f"engine: {build()}")
    print(f"driver's classes: {classes}")
    print(
        f"spark local[2]   : {spark_s:8.1f} s  {worlds / spark_s:8.1f} worlds/s  {conversations / spark_s:9.1f} conv/s"
    )
    print(f"Pool(2)          : {pool_s:8.1f} s  {worlds / pool_s:8.1f} worlds/s  {conversations / pool_s:9.1f} conv/s")
    print(f"                   (the mean of {before_s:.1f} s before Spark and {after_s:.1f} s after)")
    print(f"spark / pool     : {pool_s / spark_s:.3f} of the pool's throughput")
    print(
        f"spark peak memory: {memory.peak / 2**20:,.0f} MiB (driver, JVM and Python workers together, PSS; "
        f"their resident sizes summed: {memory.peak_resident / 2**20:,.0f} MiB)"
    )
    print(f"failed worlds    : {summary['failed_worlds']}")


if __name__ == "__main__":
    main()
