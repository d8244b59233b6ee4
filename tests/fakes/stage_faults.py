"""Implementations that fail the workload stage after it found their world failing: while it is shrunk or checked.

``faults_when_shrunk``: a wrong broker (activation's ignores_max_queue_readers) that raises on every world it
starts after its first SHRUNK_AFTER ones, as an implementation that crashes on a rerun would.
``slow_when_shrunk``: the same broker, taking SLOW_S seconds for each world it starts after its first.
``odd_rows``: the reference, answering every view with rows that are not a list.
``dies_when_shrunk``: the wrong broker, ending its process while the world of DYING_SEED_FILE is shrunk.
``escapes``: the reference, with terminal sequences (OSC 52, which writes the user's clipboard; OSC 0; U+202E) in
the reason of a drop it reports of every message it sends, and in the error it raises on every third world.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation
from sbtck.topology import plain
from sbtck.workloads.generate import generate
from tests.variants import activation

SHRUNK_AFTER = 1
SLOW_S = 1.0
_started = [0]


class _Later(ReferenceImplementation):
    def __init__(self, wrong: ReferenceImplementation, how: str) -> None:
        super().__init__(name=f"{how} when shrunk")
        self.wrong, self.how = wrong, how

    def handshake(self) -> contract.Handshake:
        return self.wrong.handshake()

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Start):
            _started[0] += 1
            if _started[0] > SHRUNK_AFTER and self.how == "faults":
                raise RuntimeError("the broker fell over on a rerun")
            if _started[0] > SHRUNK_AFTER and self.how == "slow":
                time.sleep(SLOW_S)
        return self.wrong.execute(command)


def faults_when_shrunk() -> ReferenceImplementation:
    return _Later(activation.ignores_max_queue_readers(), "faults")


def slow_when_shrunk() -> ReferenceImplementation:
    return _Later(activation.ignores_max_queue_readers(), "slow")


def restart() -> None:
    _started[0] = 0


class _OddRows(ReferenceImplementation):
    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        if isinstance(command, contract.QueryView):
            return contract.Response({"rows": 5}, response.error, response.events)
        return response


def odd_rows() -> ReferenceImplementation:
    return _OddRows(name="odd rows")


ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\u202e"
_escaped = [0]


class _Escapes(ReferenceImplementation):
    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        if isinstance(command, contract.Start):
            _escaped[0] += 1
            if _escaped[0] % 3 == 0:
                raise RuntimeError(f"broken {ESCAPES} here")
        sent = next((e for e in response.events if e.kind == "message_sent"), None)
        if sent is not None:  # and the message said dropped as it is sent
            dropped = {k: sent.fields.get(k) for k in ("instance", "dialog", "message_sequence_number", "from_target")}
            dropped |= {"rule": "RTC-5", "reason": ESCAPES}
            response.events.append(contract.Event(sent.at_ms, "message_dropped", dropped))
        return response


def escapes() -> ReferenceImplementation:
    return _Escapes(name="escapes")


# the seed of the world whose shrink ends the Python worker, in a file: Spark's workers do not see a variable set
# after the session started (tests/workloads/test_spark.py writes it)
DYING_SEED_FILE = Path(tempfile.gettempdir()) / "sbtck-test-dying-seed"
_seen = [0]


class _DiesWhenShrunk(ReferenceImplementation):
    """The wrong broker, ending its process the second time one world's topology is started in it: the check
    starts it once, its shrink again and again."""

    def __init__(self) -> None:
        super().__init__(name="dies when shrunk")
        self.wrong = activation.ignores_max_queue_readers()
        seed = int(DYING_SEED_FILE.read_text())
        self.fatal = generate(seed, 5, self.wrong.handshake().capabilities).topology

    def handshake(self) -> contract.Handshake:
        return self.wrong.handshake()

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Start) and plain(command.topology) == self.fatal:
            _seen[0] += 1
            if _seen[0] > 1:
                os._exit(9)
        return self.wrong.execute(command)


def dies_when_shrunk() -> ReferenceImplementation:
    return _DiesWhenShrunk()
