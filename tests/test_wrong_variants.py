"""The suite has teeth: every deliberately wrong broker fails at least one scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import sbtck
from tests.variants import VARIANTS


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_fails_a_scenario(variant: str, tmp_path: Path) -> None:
    run = sbtck("--iut", f"python:tests.variants:{variant}", out=tmp_path)
    failed = [sid for sid, status in run.statuses().items() if status == "failed"]
    assert run.code == 1, run.output[-3000:]
    assert failed, f"wrong variant {variant} passed every scenario"
    assert run.results()["implementation"]["name"] == f"wrong variant: {variant}"


def test_the_reference_engine_itself_passes(tmp_path: Path) -> None:
    run = sbtck(out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert set(run.statuses().values()) == {"passed"}
