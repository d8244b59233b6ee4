"""sbtck: the compatibility kit for SQL Server Service Broker behaviour.

Public names: ``features()`` (the folder of the kit's .feature files, to bind
with pytest-bdd's ``scenarios``) and ``__version__``. The kit's steps and
options come with its pytest plugin; ``sbtck run`` is the command line.
"""

from __future__ import annotations

import os
import signal
import sys


def _before_it_began(signum: int, _frame: object) -> None:
    # nothing has started: one line and status 2, as for a signal during a command (an exception raised here, in
    # the middle of an import, breaks the import machinery's locks instead)
    os.write(2, f"sbtck: stopped ({signal.Signals(signum).name}) before it began\n".encode())
    os._exit(2)


# As the program (sbtck, python -m sbtck, python -m sbtck.cli), signals are taken from the first line of the kit's
# code that runs until the command takes them (sbtck.cli.main); a process that imports the kit keeps its own.
_AS_THE_PROGRAM = (["-m", "sbtck"], ["-m", "sbtck.cli"])
if os.path.basename(sys.argv[0]) == "sbtck" or any(
    sys.orig_argv[at : at + 2] in _AS_THE_PROGRAM for at in range(len(sys.orig_argv))
):
    for _taken in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_taken, _before_it_began)

from pathlib import Path  # noqa: E402

from sbtck import resources  # noqa: E402

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
