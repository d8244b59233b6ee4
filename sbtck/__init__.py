"""sbtck: the compatibility kit for SQL Server Service Broker behaviour.

Public names: ``features()`` (the folder of the kit's .feature files, to bind
with pytest-bdd's ``scenarios``) and ``__version__``. The kit's steps and
options come with its pytest plugin; ``sbtck run`` is the command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sbtck import resources

__version__ = "0.1.0"
__all__ = ["__version__", "features"]


def features() -> Path:
    """The folder of the kit's .feature files. In a pytest session without the kit's plugin (``-p no:sbtck``) it
    stops the collection of the module that asks, in one line: the scenarios would find none of their steps."""
    bdd = sys.modules.get("pytest_bdd.utils")
    if bdd is not None and bdd.CONFIG_STACK:
        manager = bdd.CONFIG_STACK[-1].pluginmanager
        if not (manager.has_plugin("sbtck") or manager.has_plugin("sbtck.plugin")):
            import pytest

            pytest.fail(
                "sbtck: the kit's pytest plugin is off (-p no:sbtck, or PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 without "
                "-p sbtck.plugin), and the kit's scenarios need its steps: run without -p no:sbtck",
                pytrace=False,
            )
    return resources.features()
