"""The JSON-lines protocol: one request per line, one response per line, in order.

See docs/protocol.md. Requests are {"id", "op", ...} with op "hello",
"execute" or "bye"; responses echo the id with "ok" and either "result"
(and "events") or "error". This module is what a server needs (the
reference image has nothing but Python and PyYAML); the kit's side checks
answers against their declared shapes in sbtck/iut/answers.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sbtck.contract import PROTOCOL_VERSION, Handshake, Response
from sbtck.errors import ProtocolError

__all__ = ["MAX_LINE_BYTES", "PROTOCOL_VERSION", "decode", "encode", "handshake_json", "response_json"]

# The longest line either side reads, answer or request; nothing reads further, so a runaway writer cannot
# exhaust memory.
MAX_LINE_BYTES = int(os.environ.get("SBTCK_MAX_LINE_BYTES", str(16 * 1024 * 1024)))


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode()


def shown(line: bytes | str) -> str:
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    return repr(text.strip()[:200])


def decode(line: bytes | str) -> dict[str, Any]:
    """A request line (of a client of ``sbtck serve``): any JSON object."""
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON ({exc}): {shown(line)}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"a line is a JSON object, got {shown(line)}")
    return value


def handshake_json(handshake: Handshake) -> dict[str, Any]:
    return {
        "name": handshake.name,
        "version": handshake.version,
        "protocol": handshake.protocol,
        # as given, so that a wrong type is named as such by handshake_from rather than read letter by letter
        "capabilities": list(handshake.capabilities)
        if isinstance(handshake.capabilities, (list, tuple))
        else handshake.capabilities,
        "params": handshake.params,
    }


def response_json(request_id: Any, response: Response) -> dict[str, Any]:
    out: dict[str, Any] = {"id": request_id, "ok": response.ok, "events": [e.to_json() for e in response.events]}
    if response.ok:
        out["result"] = response.result
    else:
        out["error"] = response.error
    return out
