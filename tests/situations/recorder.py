"""The reference engine, recording every command and its answer's events for the situation matrix.

``--iut python:tests.situations.recorder:recording`` with SBTCK_SITUATIONS set to a folder: each process writes
one JSON-lines file there, a line a command, with the scenario pytest is running (one process per xdist worker).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

from sbtck.contract import Command, Handshake, Response
from sbtck.iut.reference import ReferenceImplementation


class Recorder:
    def __init__(self, out: IO[str]) -> None:
        self.reference = ReferenceImplementation()
        self.out = out

    def handshake(self) -> Handshake:
        return self.reference.handshake()

    def execute(self, command: Command) -> Response:
        response = self.reference.execute(command)
        scenario = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        line = {"scenario": scenario, "command": command.to_json(), "events": [e.to_json() for e in response.events]}
        self.out.write(json.dumps(line, default=str) + "\n")
        return response

    def close(self) -> None:
        self.reference.close()
        self.out.flush()


def recording() -> Recorder:
    folder = Path(os.environ["SBTCK_SITUATIONS"])
    folder.mkdir(parents=True, exist_ok=True)
    return Recorder((folder / f"{os.getpid()}.jsonl").open("a"))
