"""The event log the engine writes as it works."""

from __future__ import annotations

from typing import Any

from sbtck.contract import Event
from sbtck.observations import Kind


class EventLog:
    """Collects events; the adapter drains the new ones after every call."""

    def __init__(self) -> None:
        # only the events not drained yet: a long world's log does not keep what its adapter already took
        self.events: list[Event] = []

    def emit(self, at_ms: int, kind: Kind, **fields: Any) -> None:
        # the plain string: an event goes through pickles, JSON and xdist, which know no enum
        # (``_value_`` is that string, read without the descriptor ``.value`` goes through: this runs per event)
        self.events.append(Event(at_ms, kind._value_, fields))

    def record(self, at_ms: int, kind: Kind, fields: dict[str, Any]) -> None:
        """``emit`` with the fields already in a dict of their own, which the event keeps: for the busiest callers."""
        self.events.append(Event(at_ms, kind._value_, fields))

    def drain(self) -> list[Event]:
        new, self.events = self.events, []
        return new
