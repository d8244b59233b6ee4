"""A Router with some of its rooms replaced: how a variant changes one concern of moving messages.

The Router builds each room its ``ClassVar`` names (sbtck/engine/router.py);
a variant subclasses the room that holds the method it gets wrong (or
chooses otherwise) and hands it here.
"""

from __future__ import annotations

from typing import Any

from sbtck.engine.room import Room
from sbtck.engine.router import Router

SLOTS = ("queue_class", "transmitter_class", "routing_class", "transmission_class", "forwarding_class")


def router_with(*rooms: type[Room], base: type[Router] = Router) -> type[Router]:
    """BASE with ROOMS, each in the place of the room it subclasses."""
    attrs: dict[str, Any] = {}
    for room in rooms:
        slot = next(slot for slot in SLOTS if issubclass(room, getattr(base, slot)))
        attrs[slot] = room
    return type(f"{''.join(room.__name__ for room in rooms)}Router", (base,), attrs)


def room(name: str, base: type[Room], **methods: Any) -> type[Room]:
    """A subclass of BASE with METHODS in place of its own."""
    return type(f"{name}{base.__name__}", (base,), methods)
