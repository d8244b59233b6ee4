"""Binds every scenario of features/ (or of SBTCK_FEATURES, such as a workload's reproducers) to a test."""

import os
from pathlib import Path

from pytest_bdd import scenarios

FEATURES = Path(__file__).resolve().parents[1] / "features"

scenarios(*(os.environ.get("SBTCK_FEATURES") or str(FEATURES)).split(os.pathsep))
