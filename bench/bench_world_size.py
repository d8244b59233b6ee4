"""Seconds per conversation as worlds grow: 5, 50, 200 and 800 conversations per world.

Each size checks a few seeds on the reference engine (a check: generate,
run, invariants, trace hash) and prints the seconds per conversation and its
ratio to the smallest worlds, measured in the same run. A ratio near 1 is
linear cost; the stage's default is 5 conversations per world.

    python -m bench.bench_world_size [--sizes 5 50 200 800] [--budget-s 20]
"""

from __future__ import annotations

import argparse
import time

from sbtck.iut.reference import reference
from sbtck.workloads.generate import generate
from sbtck.workloads.stage import Checker


def per_conversation(size: int, budget_s: float) -> tuple[float, int]:
    """Seconds per conversation over the seeds checked within the budget (at least one)."""
    checker = Checker(reference, differential=False, conversations=size)
    spent, conversations, seed = 0.0, 0, 0
    while seed == 0 or spent < budget_s:
        start = time.perf_counter()
        checker.check(seed)
        spent += time.perf_counter() - start
        conversations += generate(seed, size).conversations
        seed += 1
    checker.close()
    return spent / conversations, seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 50, 200, 800])
    parser.add_argument("--budget-s", type=float, default=20.0, help="time to spend on each size")
    args = parser.parse_args()
    baseline = None
    for size in args.sizes:
        cost, worlds = per_conversation(size, args.budget_s)
        baseline = baseline or cost
        print(f"{size:5d} conversations/world: {cost * 1000:8.3f} ms/conversation over {worlds:4d} worlds, "
              f"{cost / baseline:6.2f}x the {args.sizes[0]}-conversation worlds")  # fmt: skip


if __name__ == "__main__":
    main()
