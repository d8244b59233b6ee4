"""Implementations that fail the workload stage's machinery rather than its rules.

``dies_once``: the Python worker running it exits on its first world while
the marker file exists (and removes it), as a killed Spark worker would.
``always_dies``: every attempt exits: the job cannot finish.
``crashes_on_world``: served over stdio, the process dies on world CRASH_SEED only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation
from sbtck.topology import plain
from sbtck.workloads.generate import generate

DIE_ONCE_MARKER = Path(tempfile.gettempdir()) / "sbtck-test-worker-dies-once"
CRASH_SEED = 7


class _Dying(ReferenceImplementation):
    def __init__(self, always: bool) -> None:
        super().__init__(name="dies")
        self.always = always

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Start):
            if self.always:
                os._exit(17)
            try:
                DIE_ONCE_MARKER.unlink()
            except FileNotFoundError:
                pass
            else:
                os._exit(17)
        return super().execute(command)


def dies_once() -> ReferenceImplementation:
    return _Dying(always=False)


def always_dies() -> ReferenceImplementation:
    return _Dying(always=True)


class _Crashing(ReferenceImplementation):
    def __init__(self) -> None:
        super().__init__(name="crashes on one world")
        self.fatal = generate(CRASH_SEED).topology

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Start) and plain(command.topology) == self.fatal:
            os._exit(3)
        return super().execute(command)


def crashes_on_world() -> ReferenceImplementation:
    return _Crashing()
