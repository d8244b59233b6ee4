"""What an implementation answers, checked against its declared shape before the kit uses any of it.

A wrong shape is a ProtocolError naming the field (``$.result.capabilities``),
so the scenario is an error that says what to fix, never a crash of the kit.
"""

from __future__ import annotations

from typing import Any

import msgspec

from sbtck.contract import CAPABILITIES, PROTOCOL_VERSION, Event, Handshake, Response
from sbtck.errors import ProtocolError
from sbtck.iut.protocol import shown

# what an implementation may put in a handshake parameter
Scalar = int | float | str | bool | None


# The shapes of what an implementation sends, declared once and checked before anything is used:
# a wrong one is an error naming the field (``$.result.capabilities``), never a crash of the kit.
class Answer(msgspec.Struct):
    id: int | str | None = None
    ok: bool = False
    result: dict[str, Any] | None = None
    error: str | None = None
    # with ok false: the implementation failed on the request, rather than refusing the command
    fault: bool = False
    events: list[dict[str, Any]] = []


class Hello(msgspec.Struct):
    name: str
    protocol: str
    version: str = ""
    capabilities: list[str] = []
    params: dict[str, Scalar] = {}


class EventShape(msgspec.Struct):
    at_ms: int
    kind: str


def decode_answer(line: bytes | str) -> Answer:
    """An answer line of an implementation, checked against its declared shape."""
    try:
        return msgspec.json.decode(line, type=Answer)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"an answer that breaks the protocol: {exc}: {shown(line)}") from None
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON ({exc}): {shown(line)}") from None


def handshake_from(result: dict[str, Any]) -> Handshake:
    """The hello answer's result, checked: its capabilities must be ones the kit knows."""
    version = str(result.get("protocol", ""))
    if version.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
        raise ProtocolError(f"the implementation speaks protocol {version or '(none)'}, the kit {PROTOCOL_VERSION}")
    try:
        hello = msgspec.convert(result, Hello)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"the hello answer breaks the protocol: {exc}".replace("`$", "`$.result")) from None
    if not hello.name:
        raise ProtocolError("the hello answer names no implementation ('name')")
    unknown = [c for c in hello.capabilities if c not in CAPABILITIES]
    if unknown:
        raise ProtocolError(
            f"the hello answer declares unknown capabilities {', '.join(map(repr, unknown))} - at "
            f"`$.result.capabilities`; known: {', '.join(CAPABILITIES)}"
        )
    return Handshake(hello.name, hello.version, hello.protocol, tuple(hello.capabilities), dict(hello.params))


def response_from(answer: Answer) -> Response:
    """The execute answer as a Response, once each of its events has the declared shape."""
    for i, event in enumerate(answer.events):
        try:
            msgspec.convert(event, EventShape)
        except msgspec.ValidationError as exc:
            raise ProtocolError(f"an event that breaks the protocol: {exc}".replace("`$", f"`$.events[{i}]")) from None
    events = [Event.from_json(e) for e in answer.events]
    if answer.ok:
        return Response(result=dict(answer.result or {}), events=events)
    return Response(error=str(answer.error or "refused without a reason"), events=events)
