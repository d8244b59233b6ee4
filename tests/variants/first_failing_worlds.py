"""The first world of the stage that fails each wrong variant, with and without the decision trace.

The cases are those tests/workloads/test_capabilities.py checks (every wrong variant the worlds can show, as a
black box and declaring the decision trace); this prints, for each, the seed and the rules the stage names, for a
closing note or to see which world to shrink. Exits 1 if a variant fails no world.
Run: ``python -m tests.variants.first_failing_worlds [--worlds N] [NAME ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time

from sbtck.reports.results import FAILED
from sbtck.workloads.stage import Checker
from tests.fakes import partial
from tests.workloads.test_capabilities import CASES


def first_failure(area: str, name: str, capabilities: tuple[str, ...], worlds: int) -> tuple[int | None, list[str]]:
    """The first seed below WORLDS whose world the variant fails, with the rules the stage names."""
    wrong = getattr(partial.VARIANT_MODULES[area], name)()
    checker = Checker(lambda: partial.Partial(capabilities, name, wrong.broker_class), True)
    try:
        for seed in range(worlds):
            outcome = checker.check(seed)
            if outcome.outcome == FAILED:
                return seed, sorted(set(outcome.rules))
    finally:
        checker.close()
    return None, []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=400)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    rows = []
    for area, name, declared in CASES:
        if args.names and name not in args.names:
            continue
        mode = "with decision_trace" if "decision_trace" in declared else "black box"
        started = time.process_time()
        seed, rules = first_failure(area, name, declared, args.worlds)
        rows.append({"area": area, "variant": name, "mode": mode, "seed": seed, "rules": rules})
        print(
            f"{area:10} {name:48} {mode:20} "
            f"{'NOT FOUND' if seed is None else f'seed {seed:3}'} {','.join(rules):30} "
            f"({time.process_time() - started:.1f} CPU-s)",
            flush=True,
        )
    missed = [r for r in rows if r["seed"] is None]
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
