"""The reference engine, answering without a field the contract declares or with one of another type: the kit
names what is missing or mistyped."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind

Rows = list[dict[str, Any]]


class _Answering(ReferenceImplementation):
    """The reference, with the rows of one view (or, with no view, those RECEIVE returns) changed by ``change``."""

    def __init__(self, view: str | None, change: Callable[[Rows], Rows], name: str) -> None:
        super().__init__(name=name)
        self.view, self.change = view, change

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        if self.view is None:
            events = [
                dataclasses.replace(e, fields={**e.fields, "rows": self.change(e.fields.get("rows", []))})
                if e.kind == Kind.ROWS_RETURNED
                else e
                for e in response.events
            ]
            return dataclasses.replace(response, events=events)
        if isinstance(command, contract.QueryView) and command.view == self.view:
            return dataclasses.replace(
                response, result={**response.result, "rows": self.change(response.result["rows"])}
            )
        return response


def no_from_target() -> ReferenceImplementation:
    """sys.transmission_queue's rows without their from_target column."""
    return _Answering(
        "sys.transmission_queue",
        lambda rows: [{k: v for k, v in row.items() if k != "from_target"} for row in rows],
        "a view row without from_target",
    )


def rows_without_sequence() -> ReferenceImplementation:
    return _Answering(
        None, lambda rows: [{"dialog": row["dialog"]} for row in rows], "RECEIVE rows without message_sequence_number"
    )


def times_as_text() -> ReferenceImplementation:
    """received_ms as a date in text, as a SQL Server datetime column would print."""
    return _Answering(
        "sys.transmission_queue",
        lambda rows: [{**row, "received_ms": "2026-01-01T00:00:05"} for row in rows],
        "received_ms as text",
    )


def sequence_as_text() -> ReferenceImplementation:
    return _Answering(
        None,
        lambda rows: [{**row, "message_sequence_number": str(row["message_sequence_number"])} for row in rows],
        "RECEIVE's sequence numbers as text",
    )


def started_as_number() -> ReferenceImplementation:
    """broker_started as 1 or 0, as a SQL bit column would read."""
    return _Answering(
        "sbtck.periodic_state",
        lambda rows: [{**row, "broker_started": int(bool(row["broker_started"]))} for row in rows],
        "broker_started as 1 or 0",
    )


def empty_routes_view() -> ReferenceImplementation:
    """sys.routes answers no row, whatever the tables hold."""
    return _Answering("sys.routes", lambda rows: [], "sys.routes shows nothing")


def rows_as_a_count() -> ReferenceImplementation:
    """sys.transmission_queue answers how many rows it has, not the rows."""
    return _Answering("sys.transmission_queue", lambda rows: len(rows), "rows as a count")  # type: ignore[arg-type,return-value]
