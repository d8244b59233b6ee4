"""The JSON-lines protocol: one request per line, one response per line, in order.

See docs/protocol.md. Requests are {"id", "op", ...} with op "hello",
"execute" or "bye"; responses echo the id with "ok" and either "result"
(and "events") or "error".
"""

from __future__ import annotations

import json
from typing import Any

from sbtck.iut.contract import PROTOCOL_VERSION, Event, Handshake, Response

__all__ = ["PROTOCOL_VERSION", "ProtocolError", "decode", "encode", "handshake_from", "response_from"]


class ProtocolError(ValueError):
    """A line that breaks the protocol."""


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode()


def decode(line: bytes | str) -> dict[str, Any]:
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON ({exc.msg}): {text.strip()[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"a line is a JSON object, got {text.strip()[:200]!r}")
    return value


def handshake_from(result: dict[str, Any]) -> Handshake:
    protocol = str(result.get("protocol", ""))
    if protocol.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
        raise ProtocolError(f"the implementation speaks protocol {protocol or '(none)'}, the kit {PROTOCOL_VERSION}")
    if not result.get("name"):
        raise ProtocolError("the hello answer names no implementation ('name')")
    return Handshake(
        name=str(result["name"]),
        version=str(result.get("version", "")),
        protocol=protocol,
        capabilities=tuple(result.get("capabilities", [])),
        params=dict(result.get("params", {})),
    )


def response_from(message: dict[str, Any]) -> Response:
    events = [Event.from_json(e) for e in message.get("events", [])]
    if message.get("ok"):
        return Response(result=dict(message.get("result") or {}), events=events)
    return Response(error=str(message.get("error") or "refused without a reason"), events=events)


def handshake_json(handshake: Handshake) -> dict[str, Any]:
    return {
        "name": handshake.name,
        "version": handshake.version,
        "protocol": handshake.protocol,
        "capabilities": list(handshake.capabilities),
        "params": handshake.params,
    }


def response_json(request_id: Any, response: Response) -> dict[str, Any]:
    out: dict[str, Any] = {"id": request_id, "ok": response.ok, "events": [e.to_json() for e in response.events]}
    if response.ok:
        out["result"] = response.result
    else:
        out["error"] = response.error
    return out
