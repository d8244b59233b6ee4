"""`sbtck serve`: any in-process implementation behind the JSON-lines protocol."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import socketserver
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from sbtck import limits
from sbtck.contract import typed_command
from sbtck.errors import ContractError, ProtocolError
from sbtck.iut import protocol
from sbtck.iut.implementation import Implementation

Factory = Callable[[], Implementation]
LOOPBACK = ("127.0.0.1", "localhost")
# how long a connection may stay silent before the server closes it
IDLE_S = float(os.environ.get("SBTCK_SERVE_IDLE_S", "300"))
# How many connections are served at once; one more is told so and closed, so that a flood holds no more than
# this many implementations. The listen backlog takes a burst of them at once instead of leaving it to the
# kernel's retries (with socketserver's 5, 1,000 connections took 154 s to be accepted).
BACKLOG = 1024


def serve_stream(factory: Factory, rfile: IO[bytes] | Any, wfile: IO[bytes] | Any) -> None:
    """Answer requests until "bye" or the end of input. A bad line gets an error answer, not a crash."""
    implementation = factory()
    try:
        while line := rfile.readline(protocol.MAX_LINE_BYTES + 1):
            if len(line) > protocol.MAX_LINE_BYTES:
                error = f"a request line longer than {protocol.MAX_LINE_BYTES} bytes (SBTCK_MAX_LINE_BYTES)"
                wfile.write(protocol.encode({"id": None, "ok": False, "error": error, "events": []}))
                wfile.flush()
                # the rest of the line is read and dropped a bounded piece at a time; the next line is served
                while not line.endswith(b"\n") and (line := rfile.readline(protocol.MAX_LINE_BYTES + 1)):
                    pass
                continue
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
                    response = implementation.execute(typed_command(request.get("command", {})))
                    answer = protocol.response_json(request_id, response)
                elif op == "bye":
                    wfile.write(protocol.encode({"id": request_id, "ok": True}))
                    wfile.flush()
                    return
                else:
                    answer = {"id": request_id, "ok": False, "error": f"unknown op {op!r}: hello, execute or bye"}
            except (ProtocolError, ContractError) as exc:
                answer = {"id": request_id, "ok": False, "error": str(exc), "events": []}
            except Exception as exc:  # the served implementation's failure on this request, said to the client
                error = f"the implementation failed on this request: {type(exc).__name__}: {exc}"[:4000]
                answer = {"id": request_id, "ok": False, "error": error, "fault": True, "events": []}
            wfile.write(protocol.encode(answer))
            wfile.flush()
    finally:
        implementation.close()


def _give_back() -> None:
    """Hand the memory a finished connection's engine took back to the system: without it, twenty clients that
    had left still held 946 MB of the server (freed, but kept by the C allocator for later)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def serve_stdio(factory: Factory) -> None:
    serve_stream(factory, sys.stdin.buffer, sys.stdout.buffer)


def serve_tcp(factory: Factory, address: str, ready: Callable[[str], None] = print, idle_s: float = IDLE_S) -> None:
    """One implementation per connection, connections served at once, on the loopback interface only.

    A connection that sends nothing for ``idle_s`` seconds is closed, so an abandoned client holds nothing.
    """
    host, _, port_text = address.rpartition(":")
    if host not in LOOPBACK:
        raise ValueError(f"--tcp {address!r}: sbtck serves on 127.0.0.1 only; write --tcp 127.0.0.1:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--tcp {address!r}: a port is a number from 0 (any free port) to 65535")

    # each connection holds an engine: memory in all is bounded by how many are served at once
    served = threading.BoundedSemaphore(limits.CONNECTIONS.value)

    class Handler(socketserver.StreamRequestHandler):
        timeout = idle_s

        def handle(self) -> None:
            with contextlib.suppress(TimeoutError, ConnectionError):
                if not served.acquire(blocking=False):
                    error = str(limits.CONNECTIONS.exceeded(limits.CONNECTIONS.value, "sbtck serve is serving"))
                    self.wfile.write(protocol.encode({"id": None, "ok": False, "error": error, "events": []}))
                    return
                try:
                    serve_stream(factory, self.rfile, self.wfile)
                finally:
                    served.release()
                    _give_back()

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True
        request_queue_size = BACKLOG

    try:
        server = Server(("127.0.0.1", int(port_text)), Handler)
    except OSError as exc:
        raise ValueError(f"--tcp {address!r}: cannot listen there ({exc.strerror or exc})") from None
    with server:
        ready(f"sbtck serve: listening on 127.0.0.1:{server.server_address[1]}")
        sys.stdout.flush()
        server.serve_forever()
