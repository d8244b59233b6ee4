"""Every behaviour the documents allow passes the suite: each broker of allowed.py, as the opposite choices do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import sbtck
from tests.variants import allowed


@pytest.mark.parametrize("name", allowed.ALLOWED)
def test_the_suite_passes_on_an_allowed_behaviour(name: str, tmp_path: Path) -> None:
    run = sbtck("--iut", f"python:tests.variants.allowed:{name}", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert set(run.statuses().values()) == {"passed"}
