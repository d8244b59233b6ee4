"""Seconds per conversation as worlds grow: 5, 50, 200 and 800 conversations per world.

Each size checks the same seeds (about a thousand conversations of worlds,
at least one world) on the reference engine - a check: generate, run,
invariants, trace hash - in every round; the sizes take turns within a
round, so that a machine busier in one moment slows every size alike, and
each size keeps its best round. It prints the seconds per conversation and
the ratio to the smallest worlds, measured in the same run. A ratio near 1
is linear cost; the stage's default is 5 conversations per world.

    python -m bench.bench_world_size [--sizes 5 50 200 800] [--conversations 1000] [--rounds 3]
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
        checker.check(seed)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 50, 200, 800])
    parser.add_argument("--conversations", type=int, default=1000, help="conversations per size and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if min(args.sizes) <= 0 or args.conversations <= 0 or args.rounds <= 0:
        parser.error("--sizes, --conversations and --rounds must be positive")
    checkers = {size: Checker(reference, differential=False, conversations=size) for size in args.sizes}
    seeds = {size: range(max(1, round(args.conversations / size))) for size in args.sizes}
    best = dict.fromkeys(args.sizes, float("inf"))
    for _ in range(args.rounds):
        for size in args.sizes:
            best[size] = min(best[size], seconds(checkers[size], seeds[size]) / (len(seeds[size]) * size))
    for checker in checkers.values():
        checker.close()
    print(f"best of {args.rounds} rounds, about {args.conversations} conversations per size and round")
    print(f"engine: {build()}")
    smallest = best[args.sizes[0]]
    for size in args.sizes:
        cost = f"{best[size] * 1000:8.3f} ms/conversation over {len(seeds[size]):4d} worlds"
        ratio = f"{best[size] / smallest:6.2f}x the {args.sizes[0]}-conversation worlds"
        print(f"{size:5d} conversations/world: {cost}, {ratio}")


if __name__ == "__main__":
    main()
