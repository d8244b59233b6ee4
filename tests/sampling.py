"""The long sweeps run a seeded sample in the everyday run: another sample each day, every case on demand.

A sweep (the open values, the outside brokers' switches) is hundreds of whole-suite runs, most of
the project's test time; each of its cases is a full check on its own, so a day's sample is a full check of
those cases, and the days between them cover the rest. Which sample is decided by ``SBTCK_TEST_SAMPLE``:

- unset: today's date (UTC), fixed once when the session starts (``tests/conftest.py``), so that the xdist
  workers collect the same cases, even across midnight;
- ``all``: every case;
- anything else (a date as the header printed it, say): the sample of that seed, to run a failing day again.

A case's test id names the case, so a failure is re-run with ``-k`` as well.
"""

from __future__ import annotations

import datetime
import os
import random
from collections.abc import Sequence
from typing import TypeVar

VARIABLE = "SBTCK_TEST_SAMPLE"
EVERY_CASE = "all"

Case = TypeVar("Case")


def seed() -> str:
    """The session's sample seed: the variable's value, or today's date."""
    return os.environ.get(VARIABLE) or datetime.datetime.now(datetime.UTC).date().isoformat()


def sample(cases: Sequence[Case], size: int, sweep: str) -> list[Case]:
    """SIZE of CASES, in their order, drawn by the session's seed and the SWEEP's name; all of them on demand."""
    if seed() == EVERY_CASE or size >= len(cases):
        return list(cases)
    chosen = random.Random(f"{seed()}:{sweep}").sample(range(len(cases)), size)
    return [cases[i] for i in sorted(chosen)]
