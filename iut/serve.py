"""`sbtck serve`: any in-process implementation behind the JSON-lines protocol."""

from __future__ import annotations

import socketserver
import sys
from collections.abc import Callable
from typing import IO, Any

from sbtck.iut import protocol
from sbtck.iut.contract import ContractError, command_from_json
from sbtck.iut.implementation import Implementation

Factory = Callable[[], Implementation]
LOOPBACK = ("127.0.0.1", "localhost")


def serve_stream(factory: Factory, rfile: IO[bytes] | Any, wfile: IO[bytes] | Any) -> None:
    """Answer requests until "bye" or the end of input. A bad line gets an error answer, not a crash."""
    implementation = factory()
    try:
        for line in rfile:
            if not line.strip():
                continue
            request_id = None
            try:
                request = protocol.decode(line)
                request_id = request.get("id")
                op = request.get("op")
                if op == "hello":
                    answer = {
                        "id": request_id,
                        "ok": True,
                        "result": protocol.handshake_json(implementation.handshake()),
                    }
                elif op == "execute":
                    response = implementation.execute(command_from_json(request.get("command", {})))
                    answer = protocol.response_json(request_id, response)
                elif op == "bye":
                    wfile.write(protocol.encode({"id": request_id, "ok": True}))
                    wfile.flush()
                    return
                else:
                    answer = {"id": request_id, "ok": False, "error": f"unknown op {op!r}: hello, execute or bye"}
            except (protocol.ProtocolError, ContractError) as exc:
                answer = {"id": request_id, "ok": False, "error": str(exc), "events": []}
            wfile.write(protocol.encode(answer))
            wfile.flush()
    finally:
        implementation.close()


def serve_stdio(factory: Factory) -> None:
    serve_stream(factory, sys.stdin.buffer, sys.stdout.buffer)


def serve_tcp(factory: Factory, address: str, ready: Callable[[str], None] = print) -> None:
    """One implementation per connection, one connection at a time, on the loopback interface only."""
    host, _, port = address.rpartition(":")
    if host not in LOOPBACK or not port.isdigit():
        raise ValueError(f"--tcp {address!r}: sbtck serves on 127.0.0.1 only; write --tcp 127.0.0.1:PORT")

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            serve_stream(factory, self.rfile, self.wfile)

    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", int(port)), Handler) as server:
        ready(f"sbtck serve: listening on 127.0.0.1:{server.server_address[1]}")
        sys.stdout.flush()
        server.serve_forever()
