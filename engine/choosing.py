"""Where the documents let Service Broker pick "arbitrarily", the engine asks a chooser.

The broker reports every pick in its event log, so a scenario can accept
any allowed outcome and a test can run the suite with another chooser.
"""

from __future__ import annotations

from typing import Protocol

from sbtck.engine.compiling import mypyc_attr

ROUTE = "route"  # RTC-1..4: one route among the candidates of a step
BROKER_INSTANCE = "broker_instance"  # RTM-3: one broker instance among several
DATABASE_ORDER = "database_order"  # RTL-3: the order of the other databases
# RTR-4: whom to ask once the principal is lost - the partner alone, or the lost principal again with it; the
# reference's default sorts first
PROBES = "probes"
PARTNER_ALONE, LOST_PRINCIPAL_TOO = "partner alone", "partner and lost principal"
# ACT-09: who gets the conversation group a procedure's commit releases - a reader waiting for it, or the
# procedure itself, RECEIVEing again at once; the reference's default sorts first
NEXT_READER = "next_reader"
A_WAITING_READER, THE_COMMITTER = "a waiting reader", "the committer"


# what each option of a choice would send the message to: a route's addresses, a broker instance's routes'
Addresses = dict[str, tuple[str, ...]]


class Chooser(Protocol):
    def about(self, instance: str, message: dict[str, object]) -> None:
        """Which message the next choices are for (its dialog, sequence number and direction), and when (at_ms)."""
        ...

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str: ...

    def order(self, kind: str, options: list[str]) -> list[str]: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class FirstChooser:
    """Takes the first option in name order: the reference engine's default."""

    def about(self, instance: str, message: dict[str, object]) -> None:
        pass

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return sorted(options)[0]

    def order(self, kind: str, options: list[str]) -> list[str]:
        return sorted(options)


class LastChooser(FirstChooser):
    """Takes the last: a second, equally allowed, set of choices."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return sorted(options)[-1]

    def order(self, kind: str, options: list[str]) -> list[str]:
        return sorted(options, reverse=True)
