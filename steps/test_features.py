"""Binds every scenario of features/ to a test."""

from pathlib import Path

from pytest_bdd import scenarios

scenarios(str(Path(__file__).resolve().parents[1] / "features"))
