"""An implementation that speaks the protocol like the reference engine until it misbehaves on SEND.

    python tests/fakes/misbehaving.py MODE
MODE: crash | hang | garbage | wrong_id | protocol_2
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sbtck.iut import protocol
from sbtck.iut.contract import command_from_json
from sbtck.iut.reference import reference


def main(mode: str) -> None:
    implementation = reference()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "hello":
            result = protocol.handshake_json(implementation.handshake())
            if mode == "protocol_2":
                result["protocol"] = "2.0"
            answer = {"id": request["id"], "ok": True, "result": result}
        elif request["op"] == "bye":
            return
        else:
            command = command_from_json(request["command"])
            if command.kind == "send":
                print(f"fake broker: about to {mode} on send", file=sys.stderr, flush=True)
                if mode == "crash":
                    sys.exit(3)
                if mode == "hang":
                    time.sleep(3600)
                if mode == "garbage":
                    sys.stdout.write("<html>oops</html>\n")
                    sys.stdout.flush()
                    continue
                if mode == "wrong_id":
                    request["id"] = request["id"] + 100
            answer = protocol.response_json(request["id"], implementation.execute(command))
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
