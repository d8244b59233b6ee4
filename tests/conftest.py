"""The project's tests: which sample of the long sweeps this session runs, in which order (tests/sampling.py), and
which of them share a worker (tests/grouping.py)."""

from __future__ import annotations

import os
import random

import pytest

from tests import grouping, sampling

# SBTCK_TEST_ORDER=random:SEED runs the tests in a shuffled order (the same on every xdist worker): tests that
# share a folder, a lock or a port meet each other in some order (tests/test_isolation.py)
ORDER = "SBTCK_TEST_ORDER"


def pytest_configure(config: pytest.Config) -> None:
    # fixed before the xdist workers start, which inherit it: every worker draws the same sample
    os.environ.setdefault(sampling.VARIABLE, sampling.seed())


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"sbtck sweeps: the sample of {os.environ[sampling.VARIABLE]!r} "
        f"({sampling.VARIABLE}={sampling.EVERY_CASE} runs every case)"
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouping.keep_together(config, items)
    order = os.environ.get(ORDER, "")
    if order.startswith("random:"):
        random.Random(order).shuffle(items)
