"""An implementation that speaks the protocol like the reference engine until it misbehaves on SEND.

    python tests/fakes/misbehaving.py MODE
MODE: crash | hang | garbage | wrong_id | protocol_1 (on SEND or in the hello answer), or
  grandchild  on SEND, starts `sleep 90` holding its stdout, then exits
  daemon      on SEND, a double-forked child in a session of its own holds stdout for 60 s (pid in $SBTCK_FAKE_PIDFILE)
  settled     at the hello, starts a double-forked daemon in a session of its own (sleeps 600 s, its
              standard streams closed), then answers as the reference does
  escaped     the same, its daemon with an empty environment (as `setsid env -i` gives), running
              `sleep 600.N` where N is made of $SBTCK_TEST_LINEAGE, so that a test can still find it
  endless     on SEND, writes one endless line without a newline
  flood       on SEND, answers with 100,000 more events (within the line limit)
  stderr_flood  on SEND, writes 300 MB to stderr, then a last line, and exits
  deaf        after the hello, never reads again: answers request after request, each as if it were a
              query with no rows, until the kit's requests fill the pipe it does not read
  caps_string | caps_unknown | params_list | name_number  a hello answer of the wrong shape
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import subprocess
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sbtck.contract import command_from_json
from sbtck.iut import protocol
from sbtck.iut.reference import reference


def _daemon() -> None:
    """A child that leaves this process group (as a daemon does) and keeps stdout open."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.environ["SBTCK_FAKE_PIDFILE"], "w") as pidfile:
                pidfile.write(str(os.getpid()))
            time.sleep(60)
        os._exit(0)


def _settled(bare: bool = False) -> None:
    """A daemon as a server starts one: out of this process group and session, holding none of its pipes; BARE,
    with none of this process's environment either."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            if bare:
                mark = int(os.environ.get("SBTCK_TEST_LINEAGE", "0") or "0", 16) % 10**9
                os.execve("/bin/sleep", ["sleep", f"600.{mark}"], {})
            time.sleep(600)
        os._exit(0)
    os.wait()


def _deaf(first_id: int) -> None:
    for request_id in range(first_id, first_id + 20_000):
        sys.stdout.write(json.dumps({"id": request_id, "ok": True, "result": {"rows": []}, "events": []}) + "\n")
    sys.stdout.flush()
    # Tell a test once the kit's requests fill the unread pipe: a pipe is full when its page slots are, often
    # well short of 64 KiB, so full is what has waited there a while and stopped growing.
    seen, still = -1, 0
    while os.environ.get("SBTCK_FAKE_HANGING") and still < 20:
        waiting = array.array("i", [0])
        fcntl.ioctl(sys.stdin.fileno(), termios.FIONREAD, waiting)
        still = still + 1 if waiting[0] == seen and seen > 16384 else 0
        seen = waiting[0]
        time.sleep(0.1)
    if os.environ.get("SBTCK_FAKE_HANGING"):
        Path(os.environ["SBTCK_FAKE_HANGING"]).touch()
    time.sleep(3600)


def main(mode: str) -> None:
    implementation = reference()
    for line in sys.stdin:
        request = json.loads(line)
        if mode == "deaf" and request["op"] != "hello":
            _deaf(request["id"])
        if request["op"] == "hello":
            if mode in ("settled", "escaped"):
                _settled(bare=mode == "escaped")
            result = protocol.handshake_json(implementation.handshake())
            if mode == "protocol_1":  # a broker written to the contract before 2.0
                result["protocol"] = "1.1"
            if mode == "caps_string":
                result["capabilities"] = "activation"
            if mode == "caps_unknown":
                result["capabilities"] = [*result["capabilities"], "time_travel"]
            if mode == "params_list":
                result["params"] = [5, 10]
            if mode == "name_number":
                result["name"] = 42
            answer = {"id": request["id"], "ok": True, "result": result}
        elif request["op"] == "bye":
            return
        else:
            command = command_from_json(request["command"])
            if command.kind == "send":
                print(f"fake broker: about to {mode} on send", file=sys.stderr, flush=True)
                if mode == "crash":
                    sys.exit(3)
                if mode == "stderr_flood":
                    block = ("noise " * 10_000 + "\n").encode()
                    for _ in range(300 * 1024 * 1024 // len(block)):
                        sys.stderr.buffer.write(block)
                    sys.stderr.buffer.write(b"the last words of the flood\n")
                    sys.stderr.flush()
                    sys.exit(4)
                if mode == "hang":
                    if os.environ.get("SBTCK_FAKE_HANGING"):  # a test waits for this, not a guessed time
                        Path(os.environ["SBTCK_FAKE_HANGING"]).touch()
                    time.sleep(3600)
                if mode == "garbage":
                    sys.stdout.write("<html>oops</html>\n")
                    sys.stdout.flush()
                    continue
                if mode == "wrong_id":
                    request["id"] = request["id"] + 100
                if mode == "grandchild":
                    subprocess.Popen(["sleep", "90"])  # inherits this process's stdout
                    sys.exit(0)
                if mode == "daemon":
                    _daemon()
                    sys.exit(0)
                if mode == "endless":
                    chunk = "x" * 65536
                    while True:
                        sys.stdout.write(chunk)
            if mode == "slow":  # every answer just within the request's time-out (9 s in the issue)
                time.sleep(float(os.environ.get("SBTCK_FAKE_SLOW_S", "9")))
            answer = protocol.response_json(request["id"], implementation.execute(command))
            if mode == "flood" and command.kind == "send":  # within the line limit: some 6 MB an answer
                # an event that can be (the kit holds every report against the world), only too many of them
                noise = {"at_ms": command.at_ms, "kind": "broker_configuration_notification", "instance": "sql1"}
                answer["events"] += [noise] * 100_000
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
