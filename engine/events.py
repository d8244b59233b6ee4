"""The event log the engine writes as it works.

Every event is built one way: a dict of its fields with ``at_ms`` and ``kind`` (``Kind.X``, the wire's string),
written whole and handed to ``EventLog.add``. A dict built at its full size is never grown, and an event is kept as the
one dict the workload's trace holds: making each an object and then a dict again was a tenth of checking a world.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sbtck.contract import Event
from sbtck.errors import ContractError


class EventLog:
    """Collects events; the adapter drains the new ones after every call."""

    def __init__(self) -> None:
        # only the events not drained yet: a long world's log does not keep what its adapter already took
        self.events: list[dict[str, Any]] = []
        # drained after every command, so the events not drained are what the command running has caused: the
        # adapter bounds them (sbtck/limits.py), and what it raises past the bound ends the command
        self.limit: int | None = None
        self.too_many: Callable[[int], Exception] | None = None

    def add(self, event: dict[str, Any]) -> None:
        """An event: its fields, ``at_ms`` and ``kind`` among them."""
        if self.limit is not None and len(self.events) >= self.limit:
            raise (self.too_many or ContractError)(len(self.events))
        self.events.append(event)

    def drain_json(self) -> list[dict[str, Any]]:
        """The new events, each equal to its ``Event.to_json()``, handed over: the log keeps no reference to them."""
        new, self.events = self.events, []
        return new

    def drain(self) -> list[Event]:
        return [Event(e.pop("at_ms"), e.pop("kind"), e) for e in self.drain_json()]
