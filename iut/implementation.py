"""What the kit needs of an implementation under test, however it is plugged in."""

from __future__ import annotations

from typing import Protocol

from sbtck.contract import Command, Handshake, Response


class Implementation(Protocol):
    def handshake(self) -> Handshake:
        """Name, version, capabilities and open parameter values; called once, before any command."""
        ...

    def execute(self, command: Command) -> Response:
        """Apply one command at its ``at_ms``; refuse a bad one with ``Response.error``, never by raising."""
        ...

    def close(self) -> None: ...
