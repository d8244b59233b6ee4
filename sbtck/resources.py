"""Where the kit's data lives: found through importlib.resources, in a checkout and in an installed wheel alike.

The features, the rule catalogue, the topologies and the reference profile
travel inside the ``sbtck`` package, so an installed kit runs from any folder
with no checkout present. pytest-bdd and the report read them as files, so
the package must be installed as files (pip's default), not zipped.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from sbtck.errors import KitDataMissing


def kit_path(*parts: str) -> Path:
    """A file or folder of the installed ``sbtck`` package, as a path on disk."""
    found = resources.files("sbtck").joinpath(*parts)
    if not isinstance(found, Path) or not found.exists():
        raise KitDataMissing(
            f"sbtck: {'/'.join(parts)} is not in the installed kit ({found}); "
            "reinstall it with pip, unzipped (pip install sbtck)"
        )
    return found


def kit_root() -> Path:
    """The ``sbtck`` package folder: node ids of the kit's suite are relative to it (steps/test_features.py::...)."""
    return kit_path()


def features() -> Path:
    return kit_path("features")


def suite_module() -> Path:
    """The test module that binds every feature to a test."""
    return kit_path("steps", "test_features.py")


def suite_ini() -> Path:
    """The pytest settings ``sbtck run`` uses wherever the kit is installed."""
    return kit_path("steps", "suite.ini")


def docs() -> Path:
    """The kit's documents: docs/ of the checkout, and the same files inside an installed wheel."""
    return kit_path("docs")
