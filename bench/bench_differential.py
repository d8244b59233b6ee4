"""What the differential check adds: a world checked against an implementation, beside the world checked alone.

``sbtck workload --iut SPEC`` checks every world differentially: the
reference runs beside the implementation's trace, once per connecting choice
until one explains it, and each step's events are paired up with the
reference's. Here the implementation is the reference itself, in process, so
both checks run the same engine and the ratio is the differential check's own
cost: the reference's second run, the pairing and the choosers. The two kinds
of check take turns within a round, so that a machine busier in one moment
slows both alike, and each keeps its best round.

    python -m bench.bench_differential [--worlds 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

from sbtck.engine.compiling import build
from sbtck.iut.reference import reference
from sbtck.workloads.stage import Checker


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


if __name__ == "__main__":
    main()
