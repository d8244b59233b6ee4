"""A JSON Schema of the protocol, generated from the contract, for an implementer to validate lines against.

    python -m sbtck.iut.schema [PATH | -]     (default: the kit's docs/protocol.schema.json; sbtck.generated)

It says what docs/protocol.md says, from the same declarations: the requests
the kit sends (``contract.COMMANDS``, each command's fields and JSON types),
the answers an implementation gives and the result each command declares
(``Command.result``), every event kind with the fields it
carries (``observations.FIELDS``; a field named like a view's column has that
column's type, ``views.COLUMN_TYPES``, and a field with a value set has its
values, ``observations.VALUES``), and the rows of every view. An event may
carry fields beyond its kind's (a minor version may add some), so events
allow further properties; a view's row must carry every declared column.
tests/contract/test_schema.py fails when the file and the contract differ,
and validates the kit's own requests and the reference's answers against it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import msgspec

from sbtck import contract, generated
from sbtck.observations import FIELDS, KINDS, LISTS, RECORDS, VALUES
from sbtck.topology import Route, RouteChange, Topology
from sbtck.views import COLUMN_TYPES, VIEW_COLUMN_TYPES, VIEW_COLUMNS

SCHEMA_ID = "https://sbtck.invalid/protocol.schema.json"
# the structs a command carries whole: a start's topology, a route created, altered or answered with
STRUCTS = (Topology, Route, RouteChange)
_JSON = {"string": {"type": "string"}, "integer": {"type": "integer"}, "boolean": {"type": "boolean"}}


def _column(text: str) -> dict[str, Any]:
    """A declared column type (``string or null``) as a schema."""
    names = [part.strip() for part in text.split(" or ")]
    return {"type": names[0]} if len(names) == 1 else {"type": names}


def _python(annotation: Any) -> dict[str, Any]:
    """A command field's annotation as a schema."""
    if annotation is contract.QueueRef:
        return {"$ref": "#/$defs/queue"}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [_python(a) for a in typing.get_args(annotation)]
        return {"anyOf": options}
    if annotation is type(None):
        return {"type": "null"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if origin is list:
        (item,) = typing.get_args(annotation)
        return {"type": "array", "items": _python(item)}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return {"$ref": f"#/$defs/topology.{annotation.__name__}"}  # a topology or a route, as sbtck/topology.py
    return {}


def _topology() -> dict[str, Any]:
    """The topology's structs (sbtck/topology.py), each field with its type and default. The kit writes every field,
    defaults included, so each is required of a request (cr13's G1: the topology's JSON was said nowhere whole)."""
    _, components = msgspec.json.schema_components(STRUCTS, ref_template="#/$defs/topology.{name}")
    for schema in components.values():
        schema["required"] = list(schema.get("properties", {}))
    return {f"topology.{name}": schema for name, schema in sorted(components.items())}


def _command(cls: type[contract.Command]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    properties: dict[str, Any] = {"kind": {"const": cls.kind}}
    properties.update({f.name: _python(hints[f.name]) for f in fields})
    required = ["kind", *(f.name for f in fields if f.default is dataclasses.MISSING)]
    doc = " ".join((cls.__doc__ or "").split())
    described = {"description": doc} if doc and not doc.startswith(cls.__name__ + "(") else {}
    return {"type": "object", **described, "properties": properties, "required": required}


def _result(cls: type[contract.Result]) -> dict[str, Any]:
    """A command's declared result: its fields required as typed, any others allowed (the kit does not read them)."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    properties = {f.name: _python(hints[f.name]) for f in fields}
    doc = " ".join((cls.__doc__ or "").split())
    required = [f.name for f in fields if f.default is dataclasses.MISSING]
    return {"type": "object", "description": doc, "properties": properties, "required": required}


def _field(name: str, nullable: bool = False) -> dict[str, Any]:
    schema = _field_as_named(name)
    return {"anyOf": [schema, {"type": "null"}]} if nullable and schema else schema


def _field_as_named(name: str) -> dict[str, Any]:
    if name in VALUES:
        values = {"enum": list(VALUES[name])}
        return {"type": "array", "items": values} if name in LISTS else values
    if name in COLUMN_TYPES:
        return _column(COLUMN_TYPES[name])
    if name == "rows":
        return {"type": "array", "items": {"$ref": "#/$defs/received_row"}}
    return {}


def _event(kind: str) -> dict[str, Any]:
    properties: dict[str, Any] = {"kind": {"const": kind}}
    properties.update({name: _field(name, _nullable(kind, name)) for name in FIELDS[kind]})
    return {"type": "object", "properties": properties}


def _nullable(kind: str, name: str) -> bool:
    """Does KIND declare its field NAME ``... or null``? A field's schema comes from its name, shared by every kind;
    the kind that lets it be null says so on its own."""
    declared = RECORDS[kind].field(name)
    return declared is not None and declared.type.endswith(" or null")


def _view(view: str) -> dict[str, Any]:
    columns = VIEW_COLUMNS[view]
    own = VIEW_COLUMN_TYPES.get(view, {})
    return {
        "type": "object",
        "properties": {col: _column(own.get(col) or COLUMN_TYPES[col]) for col in columns},
        "required": list(columns),
    }


def render() -> dict[str, Any]:
    commands = {kind: _command(cls) for kind, cls in sorted(contract.COMMANDS.items())}
    events = {kind: _event(kind) for kind in KINDS}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"The sbtck protocol, version {contract.PROTOCOL_VERSION}",
        "description": "One JSON object per line: a request of the kit (request) or an implementation's answer "
        "(answer). Generated from the contract by sbtck.iut.schema; docs/protocol.md says the same in prose.",
        "oneOf": [{"$ref": "#/$defs/request"}, {"$ref": "#/$defs/answer"}],
        "$defs": {
            "request": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}, "op": {"const": "hello"}, "protocol": {}},
                        "required": ["id", "op", "protocol"],
                    },
                    {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer"},
                            "op": {"const": "execute"},
                            "command": {"$ref": "#/$defs/command"},
                        },
                        "required": ["id", "op", "command"],
                    },
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}, "op": {"const": "bye"}},
                        "required": ["id", "op"],
                    },
                ]
            },
            "command": {
                "type": "object",
                "properties": {"kind": {"enum": sorted(commands)}, "at_ms": {"type": "integer"}},
                "required": ["kind", "at_ms"],
                "allOf": [
                    {"if": {"properties": {"kind": {"const": kind}}}, "then": {"$ref": f"#/$defs/command_{kind}"}}
                    for kind in commands
                ],
            },
            **{f"command_{kind}": schema for kind, schema in commands.items()},
            **_topology(),
            "queue": {
                "type": "object",
                "properties": {name: {"type": "string"} for name in ("instance", "database", "queue")},
                "required": ["instance", "database", "queue"],
            },
            "answer": {
                "type": "object",
                "properties": {
                    "id": {"type": ["integer", "string", "null"]},
                    "ok": {"type": "boolean"},
                    "result": {"type": "object"},
                    "error": {"type": "string"},
                    "fault": {"type": "boolean"},
                    "events": {"type": "array", "items": {"$ref": "#/$defs/event"}},
                },
                "required": ["id", "ok"],
            },
            "hello_result": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "protocol": {"type": "string"},
                    "version": {"type": "string"},
                    "capabilities": {"type": "array", "items": {"enum": list(contract.CAPABILITIES)}},
                    "params": {
                        "type": "object",
                        "additionalProperties": {"type": ["number", "string", "boolean", "null"]},
                    },
                },
                "required": ["name", "protocol"],
            },
            **{f"result_{kind}": _result(cls.result) for kind, cls in sorted(contract.COMMANDS.items())},
            "event": {
                "type": "object",
                "properties": {"at_ms": {"type": "integer"}, "kind": {"enum": sorted(events)}},
                "required": ["at_ms", "kind"],
                "allOf": [
                    {"if": {"properties": {"kind": {"const": kind}}}, "then": {"$ref": f"#/$defs/event_{kind}"}}
                    for kind in events
                ],
            },
            **{f"event_{kind}": schema for kind, schema in events.items()},
            "received_row": {
                "type": "object",
                "properties": {"dialog": {"type": "string"}, "message_sequence_number": {"type": "integer"}},
                "required": ["dialog", "message_sequence_number"],
            },
            **{f"row_{view}": _view(view) for view in contract.VIEWS},
        },
    }


def text() -> str:
    return json.dumps(render(), indent=2) + "\n"


if __name__ == "__main__":
    generated.main("protocol.schema.json", lambda _old: text())
