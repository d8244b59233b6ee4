"""The reference engine, answering without a field the contract declares: the kit names what is missing."""

from __future__ import annotations

import dataclasses

from sbtck import contract as c
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind


class _NoFromTarget(ReferenceImplementation):
    """sys.transmission_queue's rows without their from_target column."""

    def execute(self, command: c.Command) -> c.Response:
        response = super().execute(command)
        if isinstance(command, c.QueryView) and command.view == "sys.transmission_queue":
            rows = [{k: v for k, v in row.items() if k != "from_target"} for row in response.result["rows"]]
            return dataclasses.replace(response, result={**response.result, "rows": rows})
        return response


class _RowsWithoutSequence(ReferenceImplementation):
    """RECEIVE's rows without message_sequence_number."""

    def execute(self, command: c.Command) -> c.Response:
        response = super().execute(command)
        events = [
            dataclasses.replace(
                e, fields={**e.fields, "rows": [{"dialog": row["dialog"]} for row in e.fields.get("rows", [])]}
            )
            if e.kind == Kind.ROWS_RETURNED
            else e
            for e in response.events
        ]
        return dataclasses.replace(response, events=events)


def no_from_target() -> ReferenceImplementation:
    return _NoFromTarget(name="a view row without from_target")


def rows_without_sequence() -> ReferenceImplementation:
    return _RowsWithoutSequence(name="RECEIVE rows without message_sequence_number")


class _EmptyRoutesView(ReferenceImplementation):
    """sys.routes answers no row, whatever the tables hold."""

    def execute(self, command: c.Command) -> c.Response:
        response = super().execute(command)
        if isinstance(command, c.QueryView) and command.view == "sys.routes":
            return dataclasses.replace(response, result={**response.result, "rows": []})
        return response


def empty_routes_view() -> ReferenceImplementation:
    return _EmptyRoutesView(name="sys.routes shows nothing")
