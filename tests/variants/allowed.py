"""Brokers that behave differently from the reference where the documents allow it: the suite must pass on each.

Beside the opposite-choices broker (``routing.last_choices``), these differ
in what the documents leave unsaid, so a scenario that fails on one of them
checks more than the documents say. ``test_allowed_behaviours.py`` runs the
whole suite on each.
"""

from __future__ import annotations

import dataclasses

from sbtck import contract as c
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import FIELDS, Kind

# fields some kinds carry, added to every event of the kinds that do not: a minor protocol version may add fields
EXTRA = {"reason": "extra", "rule": "extra", "step": "extra", "trigger": "extra", "task": 99, "route": "extra"}


class _Rewriting(ReferenceImplementation):
    def rewrite(self, command: c.Command, response: c.Response) -> c.Response:
        return response

    def execute(self, command: c.Command) -> c.Response:
        return self.rewrite(command, super().execute(command))


class _ExtraFields(_Rewriting):
    def rewrite(self, command: c.Command, response: c.Response) -> c.Response:
        events = []
        for event in response.events:
            declared = set(FIELDS[Kind(event.kind)])
            extra = {k: v for k, v in EXTRA.items() if k not in declared}
            events.append(dataclasses.replace(event, fields={**event.fields, **extra, "note": "extra"}))
        return dataclasses.replace(response, events=events)


class _LowerCaseAddresses(_Rewriting):
    def rewrite(self, command: c.Command, response: c.Response) -> c.Response:
        if isinstance(command, c.QueryView) and command.view == "sys.dm_broker_connections":
            rows = [{**row, "address": str(row["address"]).lower()} for row in response.result.get("rows", [])]
            return dataclasses.replace(response, result={**response.result, "rows": rows})
        return response


class _AcknowledgesEveryMessage(_Rewriting):
    """Acknowledges every message that arrives from the initiator, not only the first."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.first: dict[str, c.Event] = {}

    def rewrite(self, command: c.Command, response: c.Response) -> c.Response:
        if isinstance(command, c.Start):
            self.first.clear()
        events: list[c.Event] = []
        for event in response.events:
            events.append(event)
            dialog = str(event.fields.get("dialog"))
            if event.kind == Kind.ACKNOWLEDGED and dialog not in self.first:
                self.first[dialog] = event
            elif event.kind == Kind.MESSAGE_ARRIVED and not event.fields.get("from_target") and dialog in self.first:
                events.append(dataclasses.replace(self.first[dialog], at_ms=event.at_ms))
        return dataclasses.replace(response, events=events)


class _ReordersWithinAnInstant(_Rewriting):
    """Reports, at one instant, the second of two events the documents do not order before the first."""

    UNORDERED = ((Kind.PROCEDURE_STARTED, Kind.EVENT_NOTIFICATION), (Kind.ROUTING_REQUESTED, Kind.CONVERSATION_DELAYED))

    def rewrite(self, command: c.Command, response: c.Response) -> c.Response:
        events = list(response.events)
        for i in range(len(events) - 1):
            first, second = events[i], events[i + 1]
            if first.at_ms == second.at_ms and (first.kind, second.kind) in self.UNORDERED:
                events[i], events[i + 1] = second, first
        return dataclasses.replace(response, events=events)


def extra_fields() -> ReferenceImplementation:
    return _ExtraFields(name="allowed: extra fields on every event")


def lower_case_addresses() -> ReferenceImplementation:
    return _LowerCaseAddresses(name="allowed: addresses shown in lower case")


def acknowledges_every_message() -> ReferenceImplementation:
    return _AcknowledgesEveryMessage(name="allowed: every message acknowledged")


def reorders_within_an_instant() -> ReferenceImplementation:
    return _ReordersWithinAnInstant(name="allowed: unordered events in the other order")


ALLOWED = ["extra_fields", "lower_case_addresses", "acknowledges_every_message", "reorders_within_an_instant"]
