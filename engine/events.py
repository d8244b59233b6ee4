"""The event log the engine writes as it works."""

from __future__ import annotations

from typing import Any, Final

from sbtck.contract import Event
from sbtck.observations import Kind

# The kinds every message's SEND, routing, arrival and RECEIVE record, as Kind's plain strings read once: the
# compiled build reads a Final of its own in C, where ``Kind.X._value_`` is three lookups in Python objects per event.
MESSAGE_SENT: Final = Kind.MESSAGE_SENT._value_
ROUTES_MATCHED: Final = Kind.ROUTES_MATCHED._value_
ROUTE_CHOSEN: Final = Kind.ROUTE_CHOSEN._value_
MESSAGE_ARRIVED: Final = Kind.MESSAGE_ARRIVED._value_
ROWS_RETURNED: Final = Kind.ROWS_RETURNED._value_
EMPTY_RESULT: Final = Kind.EMPTY_RESULT._value_
# and what every timer notification records for each instance
TIMER_NOTIFICATION: Final = Kind.TIMER_NOTIFICATION._value_
TRANSMITTER_RECLASSIFIED: Final = Kind.TRANSMITTER_RECLASSIFIED._value_


class EventLog:
    """Collects events; the adapter drains the new ones after every call.

    An event is kept as the one dict the workload's trace holds - its
    fields, ``at_ms`` and ``kind`` - and becomes an ``Event`` only when
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

    def add(self, event: dict[str, Any]) -> None:
        """An event built whole, ``at_ms`` and ``kind`` (a plain string) among its fields: a dict built at its full
        size is never grown, which two more keys would make it be (the busiest events)."""
        self.events.append(event)

    def drain_json(self) -> list[dict[str, Any]]:
        """The new events, each equal to its ``Event.to_json()``, handed over: the log keeps no reference to them."""
        new, self.events = self.events, []
        return new

    def drain(self) -> list[Event]:
        return [Event(e.pop("at_ms"), e.pop("kind"), e) for e in self.drain_json()]
