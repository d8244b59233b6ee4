"""The reference engine in a container (image:) gives the same results as in process.

Needs a Docker engine: `bash scripts/setup-docker.sh` (as root) installs and
starts one and builds the image. Outside CI its absence skips this test with
that advice; in CI (CI=true) its absence is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT, sbtck

IMAGE = "sbtck-reference:latest"


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=30).returncode == 0


def test_the_suite_in_a_container_gives_the_same_results(tmp_path: Path) -> None:
    if not _docker_ready():
        message = "no Docker engine: run `bash scripts/setup-docker.sh` as root to enable the container tests"
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the container tests, but there is {message}")
        pytest.skip(message)
    subprocess.run(["bash", str(ROOT / "scripts" / "build-image.sh"), IMAGE], check=True, timeout=600)
    in_container = sbtck("--iut", f"image:{IMAGE}", out=tmp_path / "image", timeout=600)
    assert in_container.code == 0, in_container.output[-3000:]
    in_process = sbtck(out=tmp_path / "in")
    assert in_process.code == 0
    assert in_container.outcome() == in_process.outcome()
    assert "listening on 127.0.0.1" in (tmp_path / "image" / "container.log").read_text()


def test_an_image_that_is_not_there_is_not_pulled(tmp_path: Path) -> None:
    if not _docker_ready():
        pytest.skip("no Docker engine: run `bash scripts/setup-docker.sh` as root to enable the container tests")
    run = sbtck("--iut", "image:sbtck-no-such-image:0", "--tags", "ACT-13", out=tmp_path, timeout=120)
    assert run.code == 2  # the user's setup: one line, before any scenario (tests/plugging/test_cli.py)
    assert "is not in the local Docker engine" in run.output and "the kit never pulls" in run.output
    assert not (tmp_path / "results.json").exists()
