"""What an implementation answers, checked against its declared shape before the kit uses any of it.

A wrong shape is a ProtocolError naming the field (``$.result.capabilities``),
so the scenario is an error that says what to fix, never a crash of the kit.
"""

from __future__ import annotations

import os
import reprlib
from typing import Any

import msgspec

from sbtck.contract import CAPABILITIES, PROTOCOL_VERSION, Command, Event, Handshake, QueryView, Response, Result, Start
from sbtck.errors import ProtocolError
from sbtck.iut.implementation import Implementation
from sbtck.iut.protocol import shown
from sbtck.observations import Kind
from sbtck.views import VIEW_COLUMNS, column_type
from sbtck.visible import visible

# what an implementation may put in a handshake parameter
Scalar = int | float | str | bool | None

# How many events one answer, and one scenario, may carry: a day of the reference's timers is about 150,000;
# past these the scenario is an error, so that a flooding implementation cannot take the kit's memory.
MAX_EVENTS_PER_ANSWER = int(os.environ.get("SBTCK_MAX_EVENTS_PER_ANSWER", "200000"))
MAX_EVENTS_PER_SCENARIO = int(os.environ.get("SBTCK_MAX_EVENTS_PER_SCENARIO", "250000"))
# The versions an implementation may answer: this kit's and each earlier minor of its major, which asks no more
# of it (docs/changes.md: a minor version only adds what an implementation may leave out).
_MAJOR, _MINOR = PROTOCOL_VERSION.split(".")
SPOKEN = tuple(f"{_MAJOR}.{minor}" for minor in range(int(_MINOR) + 1))


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
    said = visible(version[:40])
    if version.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
        raise ProtocolError(
            f"the implementation speaks protocol {said or '(none)'}, the kit {PROTOCOL_VERSION}: no scenario is "
            f"judged across major versions; what {PROTOCOL_VERSION} asks beyond earlier ones is in docs/changes.md"
        )
    if version not in SPOKEN:  # "2.999", "2.1-evil": a version no kit of this major has published
        raise ProtocolError(
            f"the implementation speaks protocol {said!r}, which no kit has published; this kit speaks "
            f"{', '.join(SPOKEN)} (docs/changes.md)"
        )
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


# What the steps read of a row RECEIVE returned (observations.FIELD_MEANINGS["rows"]).
RECEIVED_ROW = ("dialog", "message_sequence_number")


def _rows(rows: object, where: str, what: str, columns: tuple[str, ...], view: str | None = None) -> None:
    if not isinstance(rows, list):
        raise ProtocolError(f"{what}: `{where}` is {type(rows).__name__}, not a list of rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ProtocolError(f"{what}: `{where}[{i}]` is {type(row).__name__}, not an object")
        missing = [column for column in columns if column not in row]
        if missing:
            raise ProtocolError(
                f"{what}: the row `{where}[{i}]` has no column {', '.join(map(repr, missing))}; "
                f"the contract declares {', '.join(columns)}"
            )
        for column in columns:
            declared = column_type(view, column)
            if json_type(row[column]) not in declared.split(" or "):
                raise ProtocolError(
                    f"{what}: the row `{where}[{i}]` has {column!r} = {reprlib.repr(row[column])} "
                    f"({json_type(row[column])}); the contract declares {declared}"
                )


def json_type(value: object) -> str:
    """The JSON type of a decoded value, as the contract names types (a boolean is never an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def check_result(command: Command, response: Response) -> None:
    """What the steps read of an answer is there: the result the command declares (``Command.result``), every
    declared column of a view's rows, and the dialog and sequence number of each row RECEIVE returned. A missing
    one is the implementation's error, named here."""
    if response.error is None and type(command).result is not Result:
        try:
            msgspec.convert(response.result, type(command).result)
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                f"{command.kind}: a result that breaks the protocol: {exc}".replace("`$", "`$.result")
                + f"; the contract declares {type(command).result.__name__} (docs/protocol.md#{command.kind})"
            ) from None
    if response.error is None and isinstance(command, QueryView):
        what = f"{command.kind} {command.view!r} at {command.instance or 'the first instance'}"
        _rows(response.result.get("rows", []), "$.result.rows", what, VIEW_COLUMNS.get(command.view, ()), command.view)
    for i, event in enumerate(response.events):
        if event.kind == Kind.ROWS_RETURNED:
            what = f"{command.kind}: a {event.kind} event"
            _rows(event.fields.get("rows", []), f"$.events[{i}].rows", what, RECEIVED_ROW)


def check_counts(command: Command, response: Response, before: int) -> None:
    """An answer carries at most MAX_EVENTS_PER_ANSWER events, and a scenario, BEFORE and these, at most
    MAX_EVENTS_PER_SCENARIO."""
    if len(response.events) > MAX_EVENTS_PER_ANSWER:
        raise ProtocolError(
            f"{command.kind} at {command.at_ms}: the answer carries {len(response.events)} events, more than "
            f"{MAX_EVENTS_PER_ANSWER} (SBTCK_MAX_EVENTS_PER_ANSWER)"
        )
    if before + len(response.events) > MAX_EVENTS_PER_SCENARIO:
        raise ProtocolError(
            f"{command.kind} at {command.at_ms}: the scenario's answers carry {before + len(response.events)} events, "
            f"more than {MAX_EVENTS_PER_SCENARIO} (SBTCK_MAX_EVENTS_PER_SCENARIO)"
        )


def check_times(command: Command, response: Response, since_ms: int) -> None:
    """Events are what happened since the previous command, up to this one's time: one stamped earlier or later
    is a protocol error, never a verdict (an event from the far past or future would otherwise count)."""
    for i, event in enumerate(response.events):
        if not since_ms <= event.at_ms <= command.at_ms:
            shown_at = str(event.at_ms) if len(str(event.at_ms)) <= 20 else str(event.at_ms)[:20] + "..."
            raise ProtocolError(
                f"{command.kind} at {command.at_ms}: the event `$.events[{i}]` ({event.kind}) is stamped {shown_at}, "
                f"outside {since_ms}..{command.at_ms}: an answer carries what happened since the previous command"
            )


class Checked:
    """An implementation whose every answer is checked (``check_counts``, ``check_times``, ``check_result``)
    before a step reads any of it."""

    def __init__(self, inner: Implementation) -> None:
        self.inner = inner
        self.since_ms = 0
        self.events = 0  # of the scenario so far

    def handshake(self) -> Handshake:
        return self.inner.handshake()

    def execute(self, command: Command) -> Response:
        since = command.at_ms if isinstance(command, Start) else self.since_ms
        if isinstance(command, Start):
            self.events = 0
        response = self.inner.execute(command)
        wrong = None
        try:
            check_counts(command, response, self.events)
            check_times(command, response, since)
            check_result(command, response)
        except ProtocolError as exc:
            wrong = str(exc)
        if wrong is not None:
            # raised afresh, out of the frames that hold the answer: pytest keeps a failed step's traceback, with
            # every frame's locals, to the end of the run
            del response
            raise ProtocolError(wrong)
        self.events += len(response.events)
        self.since_ms = command.at_ms
        return response

    def close(self) -> None:
        self.inner.close()
