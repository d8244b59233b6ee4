"""The event log the engine writes as it works."""

from __future__ import annotations

from typing import Any

from sbtck.contract import Event
from sbtck.observations import Kind


class EventLog:
    """Collects events; the adapter drains the new ones after every call.

    An event is kept as the one dict the workload's trace holds - its
    fields, then ``at_ms`` and ``kind`` - and becomes an ``Event`` only when
    an adapter asks for one: a world records hundreds of events, and making
    each an object and then a dict again was a tenth of checking it.
    """

    def __init__(self) -> None:
        # only the events not drained yet: a long world's log does not keep what its adapter already took
        self.events: list[dict[str, Any]] = []

    def emit(self, at_ms: int, kind: Kind, **fields: Any) -> None:
        # the plain string: an event goes through pickles, JSON and xdist, which know no enum
        # (``_value_`` is that string, read without the descriptor ``.value`` goes through: this runs per event)
        fields["at_ms"], fields["kind"] = at_ms, kind._value_
        self.events.append(fields)

    def record(self, at_ms: int, kind: Kind, fields: dict[str, Any]) -> None:
        """``emit`` with the fields in a fresh dict the log keeps and adds to: for the busiest callers."""
        fields["at_ms"], fields["kind"] = at_ms, kind._value_
        self.events.append(fields)

    def drain_json(self) -> list[dict[str, Any]]:
        """The new events, each equal to its ``Event.to_json()``, handed over: the log keeps no reference to them."""
        new, self.events = self.events, []
        return new

    def drain(self) -> list[Event]:
        return [Event(e.pop("at_ms"), e.pop("kind"), e) for e in self.drain_json()]
