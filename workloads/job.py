"""The Spark job: seeds spread over partitions, one implementation adapter per partition, results to Parquet.

Tasks return rows; Spark writes them. A task that dies is retried by Spark
and its rows are written once, by the attempt that commits: no world is
counted twice or lost. Progress and the failures by rule are read from
accumulators while the job runs; the printed aggregates are computed again
from the written rows at the end, which is what summary.json holds.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbtck.reports.results import ERROR, FAILED, NOT_APPLICABLE, PASSED
from sbtck.workloads import record
from sbtck.workloads.generate import GENERATOR_VERSION
from sbtck.workloads.output import Output
from sbtck.workloads.progress import Progress
from sbtck.workloads.stage import UNDECIDED, Checker, Outcome

SUMMARY_COLUMNS = (
    "seed",
    "version",
    "conversations",
    "operations",
    "instances",
    "events",
    "outcome",
    "rules",
    "capabilities",
    "trace_hash",
    "detail",
)
FAILURE_COLUMNS = ("seed", "outcome", "rules", "detail", "script", "iut_trace", "reference_trace")
WORLDS_PER_PARTITION = 2500
# how long the reproducers may take to run on the reference engine before they are published unchecked
REPRODUCERS_CHECK_S = 600


@dataclass(frozen=True)
class Plan:
    worlds: int
    seed: int = 0
    iut: str = "reference"
    master: str = "local[*]"
    out: Path = Path("out/workload")
    conversations: int = 5
    partitions: int | None = None
    shrink_limit: int = 10
    areas: tuple[str, ...] | None = None  # the areas worlds are drawn in by turns; None: the first declared

    @property
    def differential(self) -> bool:
        return self.iut != "reference"

    def slices(self, parallelism: int) -> list[tuple[int, int]]:
        """(first seed, count) per partition: a few large ones, at least one per core."""
        wanted = self.partitions or max(parallelism, math.ceil(self.worlds / WORLDS_PER_PARTITION))
        count = max(1, min(wanted, self.worlds))
        size, extra = divmod(self.worlds, count)
        out, first = [], self.seed
        for i in range(count):
            n = size + (1 if i < extra else 0)
            out.append((first, n))
            first += n
        return out


_FAILED_TASK = re.compile(r"Task (\d+) in stage \d+\.\d+ failed (\d+) times")


def failed_worlds(plan: Plan, parallelism: int, why: str) -> str | None:
    """The worlds of the task whose failure ended the job, as a rerun of them alone, where Spark's error names it."""
    found = _FAILED_TASK.search(why)
    slices = plan.slices(parallelism)
    if found is None or int(found.group(1)) >= len(slices):
        return None
    first, count = slices[int(found.group(1))]
    return (
        f"the task of the {count} worlds from seed {first} failed {found.group(2)} times (its Python worker may have "
        f"died: run them alone with --seed {first} --worlds {count} --master local[1])"
    )


def schema() -> Any:
    from pyspark.sql import types as t

    long, text = t.LongType(), t.StringType()
    fields = [
        t.StructField("seed", long, False),
        t.StructField("version", t.IntegerType(), False),
        t.StructField("conversations", long, False),
        t.StructField("operations", long, False),
        t.StructField("instances", long, False),
        t.StructField("events", long, False),
        t.StructField("outcome", text, False),
        t.StructField("rules", t.ArrayType(text, False), False),
        t.StructField("capabilities", t.ArrayType(text, False), False),
        t.StructField("trace_hash", text, False),
        t.StructField("detail", text, False),
        t.StructField("script", text, True),
        t.StructField("iut_trace", text, True),
        t.StructField("reference_trace", text, True),
    ]
    return t.StructType(fields)


def _partition(plan: Plan, slices: list[tuple[int, int]], counters: Any) -> Any:
    """The function each task runs on its partition index: its seeds, checked in order."""

    def check_partition(index: int, _: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        from sbtck.iut.loader import factory_for

        first, count = slices[index]
        done, rules, conversations = counters
        checker = Checker(factory_for(plan.iut), plan.differential, plan.conversations, plan.areas)
        try:
            for seed in range(first, first + count):
                row = checker.check(seed).row()
                done.add(1)
                conversations.add(row["conversations"])
                if row["outcome"] in (FAILED, ERROR):
                    rules.add({rule: 1 for rule in row["rules"] or [row["outcome"]]})
                yield tuple(row.values())
        finally:
            checker.close()

    return check_partition


def _counters(spark: Any) -> tuple[Any, Any, Any]:
    from pyspark.accumulators import AccumulatorParam

    class Tally(AccumulatorParam[dict[str, int]]):
        def zero(self, value: dict[str, int]) -> dict[str, int]:
            return {}

        def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            for key, n in b.items():
                a[key] = a.get(key, 0) + n
            return a

    sc = spark.sparkContext
    return sc.accumulator(0), sc.accumulator({}, Tally()), sc.accumulator(0)


def run(spark: Any, plan: Plan, output: Output) -> dict[str, Any]:
    """Runs the plan and fills the output's staging folder; returns the workload summary."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as f

    began = time.monotonic()
    sc = spark.sparkContext
    slices = plan.slices(sc.defaultParallelism)
    counters = _counters(spark)
    rows = sc.parallelize(range(len(slices)), len(slices)).mapPartitionsWithIndex(
        _partition(plan, slices, counters), preservesPartitioning=True
    )
    # not verified row by row in the workers: every row is an Outcome's, whose fields the schema mirrors
    # (tests/workloads/test_worlds.py holds them to it); verifying cost about 5 us a row in every worker
    frame = spark.createDataFrame(rows, schema(), verifySchema=False).persist(StorageLevel.MEMORY_AND_DISK)
    done, rules, conversations = counters
    try:
        with Progress(lambda: (done.value, dict(rules.value), conversations.value), plan.worlds):
            frame.select(*SUMMARY_COLUMNS).write.parquet(str(output.part("worlds")))
        # the passes over the cached rows run as one task per core, not one per partition: on a long job
        # (80 partitions for a million conversations) the tasks' own cost outweighed reading the rows
        cached = frame.coalesce(sc.defaultParallelism)
        tally = Tally.of(
            cached.groupBy("outcome", "capabilities", "rules")
            .agg(f.count(f.lit(1)).alias("worlds"), f.sum("conversations").alias("conversations"))
            .collect()
        )
        # undecided worlds too: what the search could not settle is kept to be looked at, never shrunk as a failure
        cached.where(f.col("outcome").isin(FAILED, ERROR, UNDECIDED)).select(*FAILURE_COLUMNS).write.parquet(
            str(output.part("failures"))
        )
        # and each readable without Spark or Parquet: `sbtck workload show` reads them
        unsettled = cached.where(f.col("outcome").isin(FAILED, ERROR, UNDECIDED)).select(*FAILURE_COLUMNS)
        record.write((record.record(r.asDict()) for r in unsettled.orderBy("seed").toLocalIterator()), output.staging)
        failing = [
            Outcome(**r.asDict())
            for r in _first(cached, FAILED, plan.shrink_limit if tally.outcomes.get(FAILED) else 0)
        ]
        errors = [
            {"seed": int(r["seed"]), "detail": r["detail"]}
            for r in _first(cached, ERROR, 20 if tally.outcomes.get(ERROR) else 0)
        ]
    finally:
        frame.unpersist()
    reproducers = _reproduce(sc, plan, failing, output.part("reproducers"))
    return {
        "kind": "sbtck-workload-summary",
        "generator_version": GENERATOR_VERSION,
        "implementation": plan.iut,
        "master": plan.master,
        "first_seed": plan.seed,
        "areas": list(plan.areas) if plan.areas else None,
        "worlds": sum(tally.outcomes.values()),
        "conversations": tally.conversations,
        "failed_worlds": tally.outcomes.get(FAILED, 0) + tally.outcomes.get(ERROR, 0),
        "undecided_worlds": tally.outcomes.get(UNDECIDED, 0),
        "outcomes": dict(sorted(tally.outcomes.items())),
        # worlds by the capabilities they asked for (not-applicable ones left out)
        "capabilities": dict(sorted(tally.mix.items(), key=lambda item: (-item[1], item[0]))),
        "errors": errors,
        "duration_s": round(time.monotonic() - began, 2),
        "violations": dict(sorted(tally.by_rule.items())),
        "reproducers": reproducers,
    }


@dataclass
class Tally:
    """What summary.json counts, from one grouping of the rows: outcome, capabilities and rules."""

    conversations: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    by_rule: dict[str, int] = field(default_factory=dict)
    mix: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, groups: list[Any]) -> Tally:
        tally = cls()
        for group in groups:
            worlds = int(group["worlds"])
            tally.conversations += int(group["conversations"] or 0)
            _add(tally.outcomes, group["outcome"], worlds)
            # an undecided world breaks no rule for sure: counted apart, never under a rule
            for rule in group["rules"] if group["outcome"] != UNDECIDED else ():
                _add(tally.by_rule, rule, worlds)
            if group["outcome"] != NOT_APPLICABLE:
                _add(tally.mix, ", ".join(group["capabilities"]) or "(none)", worlds)
        return tally


def _add(counts: dict[str, int], key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


def _first(rows: Any, outcome: str, limit: int) -> list[Any]:
    """The first LIMIT rows of OUTCOME by seed; no pass over the rows when none is wanted."""
    if limit <= 0:
        return []
    from pyspark.sql import functions as f

    return list(rows.where(f.col("outcome") == outcome).orderBy("seed").limit(limit).collect())


def _reproduce(sc: Any, plan: Plan, failing: list[Outcome], folder: Path) -> list[dict[str, Any]]:
    """Each failing world (up to the limit) shrunk in the executors, written as a feature on the driver."""
    if not failing:
        return []

    def shrink_one(outcome: Outcome) -> tuple[int, str, str, int, float]:
        from sbtck.iut.loader import factory_for

        checker = Checker(factory_for(plan.iut), plan.differential, plan.conversations, plan.areas)
        try:
            text, shrunk = checker.reproduce(outcome)
        finally:
            checker.close()
        return outcome.seed, outcome.rules[0], text, len(shrunk.world.script), shrunk.seconds

    found = sc.parallelize(failing, min(len(failing), sc.defaultParallelism)).map(shrink_one).collect()
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for seed, rule, text, operations, seconds in sorted(found):
        path = folder / f"world-{seed}.feature"
        path.write_text(text)
        out.append(
            {
                "rule": rule,
                "seed": seed,
                "path": f"reproducers/{path.name}",
                "operations": operations,
                "shrink_s": round(seconds, 2),
            }
        )
    return _passing_on_the_reference(folder, out)


def _passing_on_the_reference(folder: Path, written: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reproducers that pass on the reference engine; the others are deleted, each with a line saying why.

    A reproducer states what the reference gives for its world: one that fails there would blame the
    implementation for the kit's own mistake (the shrinker's, or a step that cannot say the world), so it is
    never published.
    """
    statuses = on_the_reference(folder)
    if statuses is None:
        print(
            f"sbtck workload: the reproducers could not be run on the reference engine within {REPRODUCERS_CHECK_S} s;"
            " they are written unchecked",
            flush=True,
        )
        return written
    kept = []
    for entry in written:
        path = folder / Path(entry["path"]).name
        status = statuses.get(path.name, "not run")
        if status == PASSED:
            kept.append(entry)
            continue
        path.unlink(missing_ok=True)
        print(
            f"sbtck workload: dropped the reproducer of seed {entry['seed']} ({entry['rule']}): its scenario is"
            f" {status} on the reference engine, so it would not show the implementation's fault",
            flush=True,
        )
    return kept


def on_the_reference(folder: Path) -> dict[str, str] | None:
    """Each feature file of FOLDER run on the reference engine by `sbtck run`: its scenario's status, by file name
    (None when the run could not say)."""
    with tempfile.TemporaryDirectory(prefix="sbtck-reproducers-") as scratch:
        try:
            subprocess.run(
                [sys.executable, "-m", "sbtck", "run", "--features", str(folder), "--out", scratch],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
                timeout=REPRODUCERS_CHECK_S,
            )
        except subprocess.TimeoutExpired:
            return None
        results = Path(scratch) / "results.json"
        if not results.is_file():
            return None
        scenarios = json.loads(results.read_text()).get("scenarios", [])
    statuses: dict[str, str] = {}
    for scenario in scenarios:
        name = Path(str(scenario.get("feature_path", ""))).name
        status = str(scenario.get("status"))
        statuses[name] = status if statuses.get(name, PASSED) == PASSED else statuses[name]
    return statuses
