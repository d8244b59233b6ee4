"""What the differential check adds: a world checked against an implementation, beside the world checked alone.

``sbtck workload --iut SPEC`` checks every world differentially: the
reference runs beside the implementation's trace, searching the allowed
picks (sbtck/workloads/search.py) until a branch explains it, and each step's
events are paired up with the reference's. Here the implementation is the
reference itself, in process, so both checks run the same engine and the
ratio is the differential check's own cost: the reference's second run, the
pairing and the guide. The two kinds of check take turns within a round, so
that a machine busier in one moment slows both alike, and each keeps its
best round.

Then the search's own cost, on the same worlds: the branches it runs and
the time per world for the reference, for the reference taking the other
option at every choice (the guide must read each pick from the trace), and
for a wrong broker (one that never asks an address that lost the principal
role again), whose failing worlds run the search to the end of its tree.

    python -m bench.bench_differential [--worlds 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from sbtck.engine.broker import Broker
from sbtck.engine.choosing import LastChooser
from sbtck.engine.compiling import build
from sbtck.iut.reference import ReferenceImplementation, reference
from sbtck.workloads.generate import generate
from sbtck.workloads.search import search
from sbtck.workloads.stage import Checker
from sbtck.workloads.trace import run
from tests.variants import routing  # the kit's own wrong brokers


def seconds(checker: Checker, seeds: range) -> float:
    start = time.perf_counter()
    for seed in seeds:
        outcome = checker.check(seed)
        if outcome.outcome != "passed":
            raise SystemExit(f"world {seed} did not pass against the reference itself: {outcome.detail}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=300, help="worlds per kind of check and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.worlds <= 0 or args.rounds <= 0:
        parser.error("--worlds and --rounds must be positive")
    seeds = range(args.worlds)
    checkers = {kind: Checker(reference, differential=kind == "differential") for kind in ("alone", "differential")}
    best = dict.fromkeys(checkers, float("inf"))
    for _ in range(args.rounds):
        for kind, checker in checkers.items():
            best[kind] = min(best[kind], seconds(checker, seeds) / args.worlds)
    for checker in checkers.values():
        checker.close()
    print(f"best of {args.rounds} rounds of {args.worlds} worlds (5 conversations each)")
    print(f"engine: {build()}")
    for kind, cost in best.items():
        print(f"{kind:>13}: {cost * 1000:7.3f} ms/world")
    print(f"differential / alone: {best['differential'] / best['alone']:.2f}")
    print("the search, per world: branches run (mean, most), ms, and the worlds it failed or left undecided")
    for name, implementation in _searched().items():
        branches, most, spent, failed, undecided = 0, 0, 0.0, 0, 0
        for seed in seeds:
            world = generate(seed)
            trace = run(world, implementation())
            start = time.perf_counter()
            verdict = search(world, trace, {})
            spent += time.perf_counter() - start
            branches, most = branches + verdict.branches, max(most, verdict.branches)
            failed += bool(verdict.violations) and not verdict.undecided
            undecided += verdict.undecided
        print(
            f"{name:>21}: {branches / args.worlds:5.2f} branches (most {most}), {spent * 1000 / args.worlds:7.3f} ms,"
            f" {failed} failed, {undecided} undecided"
        )


def _searched() -> dict[str, Callable[[], ReferenceImplementation]]:
    last = type("LastChoices", (Broker,), {"chooser_class": LastChooser})
    return {
        "reference": reference,
        "the other choices": lambda: ReferenceImplementation(broker_class=last, name="last choices"),
        "a wrong broker": routing.never_asks_a_lost_principal_again,
    }


if __name__ == "__main__":
    main()
