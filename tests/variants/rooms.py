"""A Router, queue monitors or Receiving with some of their rooms replaced: how a variant changes one concern.

The Router builds each room its ``ClassVar`` names (sbtck/engine/router.py),
and so do the queue monitors (sbtck/engine/activation.py) and Receiving
(sbtck/engine/receiving.py); a variant subclasses the room that holds the
method it gets wrong (or chooses otherwise) and hands it here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sbtck.engine.activation import QueueMonitors
from sbtck.engine.activation_room import ActivationRoom
from sbtck.engine.receiving import Receiving
from sbtck.engine.room import Room
from sbtck.engine.router import Router
from sbtck.engine.transactions import Transactions

SLOTS = ("queue_class", "transmitter_class", "routing_class", "transmission_class", "forwarding_class")
MONITOR_SLOTS = ("checks_class", "internal_class", "external_class")
Part = TypeVar("Part")


def router_with(*rooms: type[Room], base: type[Router] = Router) -> type[Router]:
    """BASE with ROOMS, each in the place of the room it subclasses."""
    return _with_rooms(base, SLOTS, rooms, "Router")


def monitors_with(*rooms: type[ActivationRoom], base: type[QueueMonitors] = QueueMonitors) -> type[QueueMonitors]:
    """BASE with ROOMS, each in the place of the room it subclasses."""
    return _with_rooms(base, MONITOR_SLOTS, rooms, "QueueMonitors")


def receiving_with(*rooms: type[Transactions], base: type[Receiving] = Receiving) -> type[Receiving]:
    """BASE with ROOMS, each in the place of the room it subclasses."""
    return _with_rooms(base, ("transactions_class",), rooms, "Receiving")


def _with_rooms(base: type[Part], slots: tuple[str, ...], rooms: tuple[type, ...], suffix: str) -> type[Part]:
    attrs: dict[str, Any] = {}
    for room in rooms:
        slot = next(slot for slot in slots if issubclass(room, getattr(base, slot)))
        attrs[slot] = room
    return type(f"{''.join(room.__name__ for room in rooms)}{suffix}", (base,), attrs)


def room(name: str, base: type[Room], **methods: Any) -> type[Room]:
    """A subclass of BASE with METHODS in place of its own."""
    return type(f"{name}{base.__name__}", (base,), methods)
