"""The Spark job: seeds spread over partitions, one implementation adapter per partition, results to Parquet.

Tasks return rows; Spark writes them. A task that dies is retried by Spark
and its rows are written once, by the attempt that commits: no world is
counted twice or lost. Progress and the failures by rule are read from
accumulators while the job runs; the printed aggregates are computed again
from the written rows at the end, which is what summary.json holds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbtck.contract import ERROR, FAILED, NOT_APPLICABLE, PASSED
from sbtck.visible import visible
from sbtck.workloads import record
from sbtck.workloads.generate import GENERATOR_VERSION
from sbtck.workloads.output import Output
from sbtck.workloads.progress import Progress
from sbtck.workloads.stage import UNDECIDED, Checker, Outcome, undecided_reason

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
# how long one failing world may be shrunk: then its smallest failing form so far is written (an implementation
# slow to answer made each try of a shrink take minutes, and the job hours)
SHRINK_BUDGET_SETTING = "SBTCK_SHRINK_BUDGET_S"
SHRINK_BUDGET_S = 300.0


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
        done, rules, conversations, declared = counters
        checker = Checker(factory_for(plan.iut), plan.differential, plan.conversations, plan.areas)
        try:
            for seed in range(first, first + count):
                row = checker.check(seed).row()
                if seed == first and checker.handshake is not None:
                    declared.add(dict.fromkeys(checker.handshake.capabilities, 1))
                done.add(1)
                conversations.add(row["conversations"])
                if row["outcome"] in (FAILED, ERROR):
                    rules.add({rule: 1 for rule in row["rules"] or [row["outcome"]]})
                yield tuple(row.values())
        finally:
            checker.close()

    return check_partition


def _counters(spark: Any) -> tuple[Any, Any, Any, Any]:
    from pyspark.accumulators import AccumulatorParam

    class Tally(AccumulatorParam[dict[str, int]]):
        def zero(self, value: dict[str, int]) -> dict[str, int]:
            return {}

        def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            for key, n in b.items():
                a[key] = a.get(key, 0) + n
            return a

    sc = spark.sparkContext
    # worlds done, failed worlds by rule, conversations, and the capabilities the implementation declared (by task)
    return sc.accumulator(0), sc.accumulator({}, Tally()), sc.accumulator(0), sc.accumulator({}, Tally())


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
    done, rules, conversations, declared = counters
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
    reproducers, unreproduced = _reproduce(sc, plan, failing, output.part("reproducers"))
    return {
        "kind": "sbtck-workload-summary",
        "generator_version": GENERATOR_VERSION,
        "implementation": plan.iut,
        "master": plan.master,
        "first_seed": plan.seed,
        "areas": list(plan.areas) if plan.areas else None,
        # what the implementation declared in its handshake (decision_trace among them): the worlds' own mix is
        # "capabilities" below, which no world asks decision_trace of
        "declared": sorted(declared.value),
        "worlds": sum(tally.outcomes.values()),
        "conversations": tally.conversations,
        "failed_worlds": tally.outcomes.get(FAILED, 0) + tally.outcomes.get(ERROR, 0),
        "undecided_worlds": tally.outcomes.get(UNDECIDED, 0),
        # why, with how many worlds each: where the search ran out of budget
        "undecided_reasons": dict(sorted(tally.undecided.items(), key=lambda item: (-item[1], item[0]))),
        "outcomes": dict(sorted(tally.outcomes.items())),
        # worlds by the capabilities they asked for (not-applicable ones left out)
        "capabilities": dict(sorted(tally.mix.items(), key=lambda item: (-item[1], item[0]))),
        "errors": errors,
        "duration_s": round(time.monotonic() - began, 2),
        "violations": dict(sorted(tally.by_rule.items())),
        "reproducers": reproducers,
        # failing worlds shrunk without a reproducer: the implementation failed while they were, or the feature
        # written did not pass on the reference and fail on the implementation
        "unreproduced": unreproduced,
    }


@dataclass
class Tally:
    """What summary.json counts, from one grouping of the rows: outcome, capabilities and rules."""

    conversations: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    by_rule: dict[str, int] = field(default_factory=dict)
    mix: dict[str, int] = field(default_factory=dict)
    undecided: dict[str, int] = field(default_factory=dict)

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
            if group["outcome"] == UNDECIDED:
                _add(tally.undecided, undecided_reason(list(group["rules"])), worlds)
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


def shrink_budget_s() -> float:
    try:
        return float(os.environ.get(SHRINK_BUDGET_SETTING, SHRINK_BUDGET_S))
    except ValueError:
        return SHRINK_BUDGET_S


def shrunk(plan: Plan, outcome: Outcome, tried: Callable[[], None] | None = None) -> dict[str, Any]:
    """One failing world shrunk (in an executor): its feature's text, or why there is none.

    Whatever the implementation does while its world is shrunk and written (crash, hang, answers the kit cannot
    read) is this world's outcome: the task ends with a record, so that the other worlds' reproducers are kept.
    """
    from sbtck.iut.loader import factory_for

    found: dict[str, Any] = {"seed": outcome.seed, "rule": outcome.rules[0]}
    checker = Checker(factory_for(plan.iut), plan.differential, plan.conversations, plan.areas)
    try:
        text, world = checker.reproduce(outcome, budget_s=shrink_budget_s(), tried=tried)
        found.update(text=text, operations=len(world.world.script), shrink_s=round(world.seconds, 2))
    except Exception as exc:
        found["why"] = visible(f"no reproducer: shrinking the world failed: {type(exc).__name__}: {exc}")[:2000]
    finally:
        with contextlib.suppress(Exception):
            checker.close()
    return found


class Tries:
    """How many times the executors have run a world while shrinking, told by a datagram to the driver per run:
    Spark's accumulators reach the driver only as a task ends, and one world's shrink is one task of minutes."""

    def __init__(self) -> None:
        self.count = 0
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._count, daemon=True)
        self._thread.start()

    def _count(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.count += len(self.socket.recv(64))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


def _teller(port: int) -> Callable[[], None]:
    """What an executor calls on each run: one byte to the driver, lost without harm where it cannot reach it."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def tell() -> None:
        with contextlib.suppress(OSError):
            sender.sendto(b".", ("127.0.0.1", port))

    return tell


def _reproduce(sc: Any, plan: Plan, failing: list[Outcome], folder: Path) -> tuple[list[Any], list[Any]]:
    """Each failing world (up to the limit) shrunk in the executors, one task each, written as a feature on the
    driver and kept if checked both ways; returns the reproducers kept and the worlds without one, with why."""
    if not failing:
        return [], []
    tries, done = Tries(), sc.accumulator(0)
    port = tries.port

    def shrink_one(outcome: Outcome) -> dict[str, Any]:
        record = shrunk(plan, outcome, _teller(port))
        done.add(1)
        return record

    began = time.monotonic()

    def shrinking() -> str:
        return (
            f"shrinking {len(failing)} failing worlds: {done.value} done, {tries.count} runs of a smaller world, "
            f"{time.monotonic() - began:.0f} s"
        )

    try:
        with Progress(lambda: (done.value, {}, 0), len(failing), text=shrinking):
            try:
                found = sc.parallelize(failing, len(failing)).map(shrink_one).collect()
            except Exception:
                # a task that failed every attempt (an in-process implementation that ends its worker): each
                # world again on its own, so that only the world whose task cannot finish goes without
                found = [_alone(sc, outcome, shrink_one) for outcome in failing]
    finally:
        tries.close()
    folder.mkdir(parents=True, exist_ok=True)
    written, unreproduced = [], []
    for made in sorted(found, key=lambda r: int(r["seed"])):
        if "why" in made:
            unreproduced.append({"seed": made["seed"], "rule": made["rule"], "why": made["why"]})
            continue
        path = folder / f"world-{made['seed']}.feature"
        path.write_text(made["text"])
        written.append(
            {
                "rule": made["rule"],
                "seed": made["seed"],
                "path": f"reproducers/{path.name}",
                "operations": made["operations"],
                "shrink_s": made["shrink_s"],
            }
        )
    kept, dropped = checked_both_ways(folder, written, plan.iut)
    return kept, unreproduced + dropped


def _alone(sc: Any, outcome: Outcome, shrink_one: Callable[[Outcome], dict[str, Any]]) -> dict[str, Any]:
    """One world's shrink as a job of its own; its failure is that world's record."""
    try:
        return dict(sc.parallelize([outcome], 1).map(shrink_one).collect()[0])
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        why = f"no reproducer: the task shrinking the world failed every attempt: {type(exc).__name__}: {first}"
        return {"seed": outcome.seed, "rule": outcome.rules[0], "why": visible(why)}


def checked_both_ways(
    folder: Path, written: list[dict[str, Any]], iut: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The reproducers that pass on the reference engine and fail on IUT with their rule; the others are deleted,
    each with a record saying why.

    A reproducer states what the reference gives for its world: one that fails there would blame the
    implementation for the kit's own mistake (the shrinker's, or a step that cannot say the world); one that passes
    on the implementation it came from would show nothing (a feature that cannot say what the implementation did
    wrong). Neither is published. Failing "with its rule": the scenario fails (an error is the implementation's
    fault, not the rule), and where its failure names rules, the world's is among them.
    """
    if not written:
        return [], []
    reference = scenarios_run(folder, "reference")
    theirs = reference if iut == "reference" else scenarios_run(folder, iut)
    if reference is None or theirs is None:
        # kept only if checked: one not checked may blame the implementation for the kit's mistake
        unchecked = (
            f"its scenario could not be run on the reference engine and on {iut} within {REPRODUCERS_CHECK_S} s,"
            " so it was not checked both ways"
        )
        print(f"sbtck workload: the reproducers were not kept: {unchecked}", flush=True)
        for entry in written:
            (folder / Path(entry["path"]).name).unlink(missing_ok=True)
        return [], [{"seed": entry["seed"], "rule": entry["rule"], "why": unchecked} for entry in written]
    kept, dropped = [], []
    for entry in written:
        path = folder / Path(entry["path"]).name
        ours, got = reference.get(path.name), theirs.get(path.name)
        why = _not_reproducing(entry["rule"], ours, got, iut)
        if why is None:
            kept.append(entry)
            continue
        path.unlink(missing_ok=True)
        dropped.append({"seed": entry["seed"], "rule": entry["rule"], "why": why})
        print(f"sbtck workload: dropped the reproducer of seed {entry['seed']} ({entry['rule']}): {why}", flush=True)
    return kept, dropped


def _not_reproducing(rule: str, ours: dict[str, Any] | None, got: dict[str, Any] | None, iut: str) -> str | None:
    """Why a reproducer does not show its rule broken by IUT, or None when it does."""
    if ours is None or ours.get("status") != PASSED:
        status = "not run" if ours is None else ours.get("status")
        return f"its scenario is {status} on the reference engine, so it would not show the implementation's fault"
    if iut == "reference":
        return None  # the stage checked the reference against its own invariants: a failing world is the kit's
    if got is None or got.get("status") != FAILED:
        status = "not run" if got is None else got.get("status")
        return f"its scenario is {status} on {iut}, so it does not reproduce the failure"
    message = str((got.get("failure") or {}).get("message", ""))
    named = set(_BROKEN.findall(message))
    if named and rule not in named:
        return f"its scenario fails on {iut} for {', '.join(sorted(named))}, not for {rule}"
    return None


# how the stage's Then steps name a broken rule in a failure (sbtck/workloads/steps.py): "  ACT-10 at command 4 ..."
_BROKEN = re.compile(r"^  (\S+) at (?:command \d+|the end)", re.MULTILINE)


def scenarios_run(folder: Path, iut: str) -> dict[str, dict[str, Any]] | None:
    """Each feature file of FOLDER run on IUT by `sbtck run`: its scenario's record (the first one not passed), by
    file name (None when the run could not say)."""
    with tempfile.TemporaryDirectory(prefix="sbtck-reproducers-") as scratch:
        try:
            subprocess.run(
                [sys.executable, "-m", "sbtck", "run", "--features", str(folder), "--iut", iut, "--out", scratch],
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
        try:
            scenarios = json.loads(results.read_text()).get("scenarios", [])
        except ValueError:
            return None
    found: dict[str, dict[str, Any]] = {}
    for scenario in scenarios if isinstance(scenarios, list) else []:
        if not isinstance(scenario, dict):
            continue
        name = Path(str(scenario.get("feature_path", ""))).name
        if found.get(name, {"status": PASSED}).get("status") == PASSED:
            found[name] = scenario
    return found
