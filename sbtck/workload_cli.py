"""``sbtck workload``: the randomized stage on Spark. Every argument is checked before Spark starts."""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sbtck.errors import ImplementationFault, IUTSpecError, MasterError, OutputError

# imported with the command line, not when a signal may already have come: the first signal needs them
from sbtck.iut.remote import adopt_orphans, descendants, end_descendants
from sbtck.reports.results import NOT_APPLICABLE
from sbtck.visible import visible
from sbtck.workloads import sparkling

# The ranges of the numeric options, checked before any work: beyond them a job would run for years or build
# its plan out of memory before the first world (a billion worlds is some weeks on a large cluster).
WORLDS = (1, 10**9)
SEEDS = (0, 2**63 - 1 - WORLDS[1])  # a seed and every one after it are Spark longs
CONVERSATIONS = (1, 100_000)
PARTITIONS = (1, 100_000)
SHRINK_LIMIT = (0, 10_000)


def _whole(bounds: tuple[int, int], what: str) -> Any:
    least, most = bounds

    def parse(text: str) -> int:
        if len(text) > 40:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}...")
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{what} is from {least:,} to {most:,}, got {value:,}")
        return value

    return parse


def _areas(text: str) -> tuple[str, ...]:
    from sbtck.workloads.generate import AREAS, known_areas

    try:
        return tuple(known_areas(a.strip() for a in text.split(",") if a.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected areas among {', '.join(AREAS)}, separated by commas; got {text[:60]!r}"
        ) from None


def add_parser(commands: Any, **how: Any) -> None:
    p = commands.add_parser(
        "workload",
        help="generate, run and check randomized worlds on Spark; shrink failures into .feature files",
        description="Runs worlds SEED .. SEED+N-1 (each a pure function of its seed and the generator version) "
        "on the reference engine and, with --iut, on that implementation, checks invariants and the "
        "difference to the reference, and writes worlds/ and failures/ (Parquet), failures.jsonl and failures.html "
        "(each failed or undecided world, readable: sbtck workload show), reproducers/ (.feature) and "
        "summary.json under --out. The folder holds INCOMPLETE instead of summary.json until the job finishes. "
        "Exit status 0 when no world failed, 1 when some did, 2 on bad input or a job that could not finish. "
        "The first run keeps the classes Spark's driver loaded (about 170 MB in the platform's cache folder, "
        "~/.cache/sbtck on Linux, or "
        "$SBTCK_CACHE_DIR), so that later runs start faster; SBTCK_SPARK_CLASSES=off neither keeps nor uses them. "
        "Needs the spark extra (pip install 'sbtck[spark]') and Java 17.",
        epilog="example:\n  sbtck workload --worlds 2000 --iut 'cmd:node my-broker.js' --out out/mine\n"
        "  sbtck workload show out/mine        # each failed or undecided world in a line (no Spark needed)\n"
        "  sbtck workload show out/mine 1234   # world 1234: where the sides part, what differs, the rule\n"
        "  sbtck run --features out/mine/reproducers --iut 'cmd:node my-broker.js'   # rerun what it found",
        **how,
    )
    p.add_argument("--worlds", type=_whole(WORLDS, "--worlds"), default=1000, help="how many worlds (default 1000)")
    p.add_argument("--seed", type=_whole(SEEDS, "--seed"), default=0, help="the first seed (default 0)")
    p.add_argument("--iut", default="reference", help="the implementation to check (default: reference)")
    p.add_argument("--master", default="local[*]", help="the Spark master URL (default local[*])")
    p.add_argument("--out", default="out/workload", help="output folder (default out/workload)")
    p.add_argument(
        "--conversations",
        type=_whole(CONVERSATIONS, "--conversations"),
        default=5,
        help="conversations per world (default 5)",
    )
    p.add_argument(
        "--partitions", type=_whole(PARTITIONS, "--partitions"), help="Spark partitions (default: a few large ones)"
    )
    p.add_argument(
        "--areas",
        type=_areas,
        help="the areas to draw worlds in, by turns: routing, activation, periodic_tasks, separated by commas; each "
        "must be among the capabilities the implementation declares (default: the first it declares, in that order)",
    )
    p.add_argument(
        "--shrink-limit",
        type=_whole(SHRINK_LIMIT, "--shrink-limit"),
        default=10,
        help="failing worlds to shrink (default 10)",
    )


def show(argv: list[str]) -> int:
    """`sbtck workload show OUT [SEED]`: the failed and undecided worlds of a finished job, from its JSON lines
    (no Spark, no Parquet reader). A reader that stops reading (`| head`) ends it quietly, as it does `cat`."""
    try:
        return _show(argv)
    except BrokenPipeError:
        # what is left to print goes nowhere: Python would otherwise complain again as it flushes at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _show(argv: list[str]) -> int:
    import json

    from sbtck.workloads import record
    from sbtck.workloads.output import SUMMARY

    p = argparse.ArgumentParser(
        prog="sbtck workload show",
        description="Prints the failed and undecided worlds of a workload job's output folder: one line each, or with"
        f" SEED that world's record (the step where the sides part, its command, both sides' events and rows with"
        f" every differing field in [brackets], the rule). Reads {record.RECORDS}; {record.PAGE} beside it shows the"
        " same in a browser. Exit status 0 when shown, 2 for a folder that is not a workload's output or a seed"
        " that is not among its failed or undecided worlds.",
    )
    p.add_argument("out", help="the folder a finished sbtck workload job wrote (its --out)")
    p.add_argument("seed", nargs="?", type=_whole(SEEDS, "SEED"), help="the world to show in full")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        summary = json.loads((out / SUMMARY).read_text())
        if not isinstance(summary, dict) or summary.get("kind") != "sbtck-workload-summary":
            raise ValueError
    except (OSError, ValueError):
        print(
            f"sbtck workload show: {out} is not a finished workload job's output (no {SUMMARY} of one)", file=sys.stderr
        )
        return 2
    if not (out / record.RECORDS).is_file():
        print(
            f"sbtck workload show: {out} has no {record.RECORDS}: the job was run by a kit before they were written;"
            " run it again",
            file=sys.stderr,
        )
        return 2
    try:
        records = list(record.read(out))
    except (OSError, ValueError) as exc:
        print(f"sbtck workload show: {out / record.RECORDS} cannot be read: {exc}", file=sys.stderr)
        return 2
    if args.seed is None:
        print(f"{len(records)} failed or undecided worlds of {summary.get('worlds')} in {out}")
        for rec in records:
            print(visible(record.summary_line(rec)))
        if records:
            print(f"sbtck workload show {out} SEED prints a world in full; {out / record.PAGE} shows them all")
        return 0
    found = [rec for rec in records if rec["seed"] == args.seed]
    if not found:
        first, count = summary.get("first_seed", 0), summary.get("worlds", 0)
        inside = isinstance(first, int) and isinstance(count, int) and first <= args.seed < first + count
        why = "it did not fail" if inside else f"the job ran seeds {first} to {first + count - 1}"
        print(
            f"sbtck workload show: seed {args.seed} is not a failed or undecided world of {out} ({why})",
            file=sys.stderr,
        )
        return 2
    print(visible(record.text(found[0])))
    return 0


def _interrupted(output: Any, out: Path) -> int:
    # Ctrl-C says "interrupted"; SIGTERM says its name
    why = sparkling.stopped[0] if sparkling.stopped else "interrupted"
    output.fail(why)
    print(f"sbtck workload: the job did not finish ({why}); {out}/INCOMPLETE says so", file=sys.stderr)
    return 2


# what the JVM's IOException and Python's OSError both say when the disk is full
NO_SPACE = "No space left on device"


def _no_space(exc: BaseException) -> bool:
    return (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or NO_SPACE in str(exc)


def _out_of_space(output: Any, out: Path) -> int:
    """One line for a full disk: Spark's account of it is two Java traces, and INCOMPLETE may not fit either."""
    why = f"no space left on the device of {out}"
    with contextlib.suppress(OSError):  # the staging folder goes first, which frees what the job wrote
        output.fail(why)
    print(f"sbtck workload: the job did not finish: {why}; free some or name another --out", file=sys.stderr)
    return 2


def _made(spec: str, factory: Callable[[], Any]) -> None:
    """Make the implementation once and let it go: what the executors would meet first, said in one line."""
    from sbtck.iut.loader import implementation_made

    try:
        made = factory()
    except Exception as exc:  # the factory is the implementation's code
        raise ImplementationFault(f"--iut {spec}: the factory failed: {type(exc).__name__}: {exc}") from None
    implementation_made(spec, made).close()


def _program(spec: str) -> None:
    """A cmd: implementation's program must be there: else every world of the job would be an error saying so."""
    import shlex
    import shutil

    argv = shlex.split(spec[len("cmd:") :])  # factory_for has parsed it already
    if shutil.which(argv[0]) is None:
        raise IUTSpecError(f"--iut {spec}: cannot start {argv[0]!r}: no such program on PATH")


def _stop(signum: int, _frame: Any) -> None:
    """The first SIGINT or SIGTERM: every process below the kit (the JVM, its workers, the implementations, a
    reproducer's check) is killed at once, which ends whatever the job was waiting on; the job then ends as
    interrupted, exit status 2. Nothing is raised here: an exception in the middle of an import or of a Py4J call
    breaks their locks and connections, and its traceback is what the user would see. Further signals are
    ignored while the kit ends."""
    for taken in (signal.SIGINT, signal.SIGTERM):
        signal.signal(taken, signal.SIG_IGN)
    sparkling.stopped.append("interrupted" if signum == signal.SIGINT else f"signal {signal.Signals(signum).name}")
    logging.disable(logging.CRITICAL)  # Py4J logs each call the JVM's end cuts, with its traceback
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _keeping_the_kits_signals() -> Iterator[None]:
    """While the block runs, a handler set for SIGINT or SIGTERM is not set: the kit's (``_stop``) stays."""
    setting = signal.signal

    def kept(signum: int, handler: Any) -> Any:
        if signum in (signal.SIGINT, signal.SIGTERM):
            return signal.getsignal(signum)
        return setting(signum, handler)

    signal.signal = kept  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.signal = setting


def _take_signals() -> None:
    for taken in (signal.SIGINT, signal.SIGTERM):
        signal.signal(taken, _stop)


def run(args: argparse.Namespace) -> int:
    # whatever the job starts (the JVM, its Python workers, the implementations, their daemons) stays below the
    # kit, and goes when it ends, however it ends
    adopt_orphans()
    sparkling.stopped.clear()
    _take_signals()
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(
            "sbtck workload: PySpark is not installed; install the spark extra: pip install 'sbtck[spark]'",
            file=sys.stderr,
        )
        return 2
    try:
        code = _job(args)
    finally:
        for taken in (signal.SIGINT, signal.SIGTERM):
            signal.signal(taken, signal.SIG_IGN)
        logging.disable(logging.CRITICAL)  # Py4J logs, with a traceback, each call the JVM's end cuts
        end_descendants()
    return 2 if sparkling.stopped else code


def _job(args: argparse.Namespace) -> int:
    from sbtck.iut.loader import factory_for
    from sbtck.reports import outfolder
    from sbtck.workloads import job, sparkling
    from sbtck.workloads.output import Output

    # python:MODULE:FACTORY names a module of the current folder, as in sbtck run; executors get the same path
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    plan = job.Plan(
        args.worlds,
        args.seed,
        args.iut,
        args.master,
        Path(args.out),
        args.conversations,
        args.partitions,
        args.shrink_limit,
        args.areas,
    )
    output = Output(plan.out)
    try:
        factory = factory_for(plan.iut)
        if plan.iut.startswith("python:"):  # cheap to make here: a factory that makes no broker stops before Spark
            _made(plan.iut, factory)
        if plan.iut.startswith("cmd:"):
            _program(plan.iut)
        sparkling.check_master(plan.master)
        # the one lock every command writing into --out holds (sbtck/reports/outfolder.py); a file there, or a
        # folder that cannot be made, is refused by prepare in its own words
        with contextlib.suppress(OSError):
            if (not plan.out.exists() or plan.out.is_dir()) and not outfolder.hold(plan.out):
                raise OutputError(f"--out {plan.out.resolve()}: {outfolder.TAKEN}")
        output.prepare()
    except (IUTSpecError, MasterError, OutputError, ImplementationFault) as exc:
        print(f"sbtck workload: {exc}", file=sys.stderr)
        return 2
    areas = f" in the areas {', '.join(plan.areas)}" if plan.areas else ""
    print(f"sbtck workload: {plan.worlds} worlds{areas} from seed {plan.seed} on {plan.master}, against {plan.iut}")
    if sparkling.stopped:  # a signal while the kit was getting ready: no Spark is started
        return _interrupted(output, plan.out)
    classes = sparkling.class_archive()
    try:
        # PySpark sets a SIGINT handler of its own as the session starts, which talks to the JVM from inside the
        # signal (a Py4J traceback when the JVM is going): it is kept from setting it, so no signal finds it there
        with _keeping_the_kits_signals():
            spark = sparkling.session(plan.master, classes=classes)
        _take_signals()
    except BaseException as exc:
        if classes is not None:
            classes.release()
        if isinstance(exc, KeyboardInterrupt) or sparkling.stopped:
            return _interrupted(output, plan.out)
        output.fail(f"Spark did not start on {plan.master}: {exc}")
        print(f"sbtck workload: Spark did not start on --master {plan.master}: {exc}", file=sys.stderr)
        return 2
    try:
        summary = job.run(spark, plan, output)
        if sparkling.stopped:  # what the job was waiting on ended with the processes the signal ended
            raise KeyboardInterrupt
        spark.stop()
    except BaseException as exc:
        if classes is not None:
            classes.release()
        if isinstance(exc, KeyboardInterrupt) or sparkling.stopped:
            return _interrupted(output, plan.out)
        parallelism = spark.sparkContext.defaultParallelism
        with contextlib.suppress(Exception):  # the JVM goes with the kit in any case (run's end_descendants)
            spark.stop()
        if _no_space(exc):
            return _out_of_space(output, plan.out)
        why = f"{type(exc).__name__}: {exc}"
        worlds = job.failed_worlds(plan, parallelism, why)
        if worlds is not None:  # which worlds, first: Spark's own account is a Java trace of thousands of lines
            why = f"{worlds}; {why.splitlines()[0][:500]}"
        output.fail(why[:4000])
        print(
            f"sbtck workload: the job did not finish ({visible(why[:2000])}); {plan.out}/INCOMPLETE says so",
            file=sys.stderr,
        )
        return 2
    try:
        output.finish(summary)
    except OSError as exc:
        if not _no_space(exc):
            raise
        return _out_of_space(output, plan.out)
    _print(summary, plan.out)
    if classes is not None and classes.making is not None:
        # the results are out: what is left is for the next run
        print(
            "sbtck workload: keeping the classes Spark's driver loaded, so that the next run starts faster "
            f"(once; {sparkling.CLASSES_SETTING}=off turns it off) ...",
            flush=True,
        )
        if classes.keep():
            print(f"sbtck workload: kept in {classes.path}")
    return exit_status(summary)


def exit_status(summary: dict[str, Any]) -> int:
    """As `sbtck run`'s: 1 when a world failed, 2 when no world applied to the capabilities declared (nothing
    ran, which is no success), else 0."""
    if summary["failed_worlds"]:
        return 1
    applied = sum(n for outcome, n in summary.get("outcomes", {}).items() if outcome != NOT_APPLICABLE)
    if not applied:
        print("sbtck workload: nothing ran: no world applies to the capabilities the implementation declares")
        return 2
    return 0


def _print(summary: dict[str, Any], out: Path) -> None:
    print(
        f"sbtck workload: {summary['worlds']} worlds, {summary['conversations']} conversations, "
        f"{summary['failed_worlds']} failed, in {summary['duration_s']} s"
    )
    if summary.get("undecided_worlds"):
        print(
            f"  undecided      {summary['undecided_worlds']} worlds: no allowed branch explained them before the"
            " search's budget ran out (kept in failures/, not counted as failed)"
        )
        for reason, count in summary.get("undecided_reasons", {}).items():
            print(f"    {count} {visible(reason)}")
    for rule, count in summary["violations"].items():
        print(f"  {visible(rule):<14} {count} worlds")
    for error in summary["errors"]:
        # an implementation's words, shown as the page shows them (sbtck/visible.py): never a terminal's sequence
        print(f"  error in world {error['seed']}: {visible(error['detail'].splitlines()[0])}")
    for rep in summary["reproducers"]:
        print(f"  reproducer for {visible(rep['rule'])} (seed {rep['seed']}): {out / rep['path']}")
    for lost in summary.get("unreproduced", []):
        print(
            f"  no reproducer for {visible(lost['rule'])} (seed {lost['seed']}): {visible(lost['why'].splitlines()[0])}"
        )
    print(f"sbtck workload: {out / 'summary.json'}")
    sys.stdout.flush()
