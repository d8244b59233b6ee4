"""A failing world of ten thousand operations or more, shrunk: its size before and after, and the time it took.

The baseline is one check of the unshrunk world, measured in the same run:
the ratio says how many full checks the shrinking cost.

    python -m bench.bench_shrink [--conversations 2000] [--iut SPEC]
"""

from __future__ import annotations

import argparse
import time

from sbtck.engine.compiling import build
from sbtck.iut.loader import factory_for
from sbtck.reports.results import FAILED
from sbtck.workloads.generate import generate
from sbtck.workloads.stage import Checker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--iut", default="python:tests.variants.activation:ignores_max_queue_readers")
    args = parser.parse_args()
    checker = Checker(factory_for(args.iut), differential=True, conversations=args.conversations)
    for seed in range(50):
        start = time.perf_counter()
        outcome = checker.check(seed)
        once = time.perf_counter() - start
        if outcome.outcome == FAILED:
            break
    else:
        raise SystemExit(f"{args.iut} failed no world of {args.conversations} conversations in 50 seeds")
    text, shrunk = checker.reproduce(outcome, max_tests=5000)
    steps = sum(1 for line in text.splitlines() if line.startswith(("    And ", "    When ")))
    print(f"world {seed}: {outcome.operations:,} operations, {generate(seed, args.conversations).conversations} "
          f"conversations, breaks {', '.join(outcome.rules)}")  # fmt: skip
    print(f"engine            : {build()}")
    print(f"one check of it   : {once:8.2f} s")
    print(f"shrunk to         : {len(shrunk.world.script)} operations ({steps} steps), keeping {outcome.rules[0]}")
    print(
        f"shrinking         : {shrunk.seconds:8.2f} s, {shrunk.tests} test runs, {shrunk.seconds / once:.3f}x one check"
    )


if __name__ == "__main__":
    main()
