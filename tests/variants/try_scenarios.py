"""Run chosen scenarios on every broker the team holds correct, before they land (docs/design.md, decision 15).

    python -m tests.variants.try_scenarios "EXPR"        (EXPR: pytest's -k, e.g. "starts_to_wait_is_checked")

A new scenario must pass wherever the documents allow what a broker does: on the reference; on each allowed
variant (tests/variants/allowed.py); on the reference tuned to every value of every open parameter's sweep, both
ways of connecting where it applies (tests/variants/test_open_values.py's cases, all of them, not a day's
sample); on each clean-room broker both ways (tests/cleanroom); and on every allowed switch of the outside brokers
in ../shared/independent/ when they are there (tests/variants/test_independent.py). A scenario that fails one of
them is wrong, or that broker is: decide from the documents before it lands. The CI failure of stop 58 was a
scenario run on every broker but the tuned reference, which resent an unacknowledged message after 25 seconds.

Prints each broker that does not pass, with the tests that failed; the exit status is 1 when any did not.
A scenario a broker does not declare the capability of is not applicable there and passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cleanroom.test_cleanroom import BROKERS, WRONG
from tests.helpers import Run
from tests.variants.allowed import ALLOWED
from tests.variants.test_independent import (
    ACTIVATION_PERIODIC,
    ALLOWED_ACTIVATION_PERIODIC,
    ALLOWED_ROUTING,
    ROUTING,
    WRONG_AS_WRITTEN,
)
from tests.variants.test_open_values import ALL_CASES

ROOT = Path(__file__).resolve().parents[2]
SBTCK = [sys.executable, "-m", "sbtck"]
# a scenario of a capability the broker does not declare is not applicable: it decides nothing
FINE = ("passed", "differs", "not applicable")
Broker = tuple[str, str | None, dict[str, str], dict[str, str]]  # what, --iut (None: the reference), env, wrong


def brokers() -> Iterator[Broker]:
    """Every broker a new scenario must pass on, with the scenarios the documents make it fail (test_cleanroom's and
    test_independent's lists)."""
    yield "the reference", None, {}, {}
    for name in ALLOWED:
        yield f"allowed {name}", f"python:tests.variants.allowed:{name}", {}, {}
    for param, value, factory in ALL_CASES:
        tuned = {"SBTCK_TUNED": f"{param}={value:g}"}
        yield f"{param}={value:g} ({factory})", f"python:tests.fakes.tuned:{factory}", tuned, {}
    for name, modes in BROKERS.items():
        for mode, iut in modes.items():
            yield f"clean-room {name}, {mode}", iut, {}, WRONG.get(name, {})
    for folder, switches in [(ACTIVATION_PERIODIC, ALLOWED_ACTIVATION_PERIODIC), (ROUTING, ALLOWED_ROUTING)]:
        if folder.is_dir():
            wrong = WRONG_AS_WRITTEN.get(folder, {})
            for switch in switches:
                yield f"{folder.name} {switch}", f"cmd:node {folder / 'broker.js'} {switch}", {}, wrong


def _try(expression: str, broker: Broker) -> tuple[str, list[str]]:
    what, iut, env, wrong = broker
    with tempfile.TemporaryDirectory(prefix="sbtck-try-") as out:
        chosen = ["--iut", iut] if iut else []
        proc = subprocess.run(
            [*SBTCK, "run", *chosen, "--out", out, "--", "-k", expression, "-p", "no:cacheprovider"],
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        run = Run(proc.returncode, proc.stdout + proc.stderr, Path(out))
        try:
            return what, run.unexpected(wrong, fine=FINE)
        except (OSError, ValueError, KeyError):  # no results.json: the run itself went wrong
            return what, [f"exit {proc.returncode}: {run.output[-400:]}"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    expression = argv[0]
    everyone = list(brokers())
    print(f"{len(everyone)} brokers, the scenarios of -k {expression!r}", flush=True)
    bad = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for done, (what, failed) in enumerate(pool.map(lambda b: _try(expression, b), everyone), 1):
            if failed:
                bad += 1
                print(f"NOT PASSED {what}: {', '.join(failed)}", flush=True)
            elif done % 50 == 0:
                print(f"{done} of {len(everyone)} done", flush=True)
    print(f"{len(everyone) - bad} of {len(everyone)} brokers pass")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
