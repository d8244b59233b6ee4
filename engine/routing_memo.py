"""What routing found at one place, kept while it cannot change: a cache that changes no outcome.

A delayed conversation is matched again every ``delayed_retry_s`` for as long
as it waits (RTM-8), and every message of a conversation is routed the same
way. Until a route of the table changes, a routing request is made, a route
of it reaches its expiry or the instance gains or loses the service, another
attempt finds the same: then matching and choosing are not run again, and the
router only reports what they found. This keeps a long world's cost from
growing with its length times its messages.

Two kinds of findings are kept:
- per message and place, one that found nothing to send it by (the attempt
  delayed it), unless it made a routing request (the next attempt then finds
  the request pending) or the chooser picked the broker instance (RTM-3: the
  next attempt asks again);
- per place, service and broker instance, a chosen route, unless the chooser
  took part in matching or choosing: another attempt may be answered otherwise
  (RTM-3, RTC-1..4), as the workload stage's chooser follows another
  implementation's picks attempt by attempt.

``tests/workloads/test_trace_hashes.py`` holds that a router keeping nothing
gives every world the same trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from sbtck.engine.choosing import Addresses, Chooser
from sbtck.engine.model import Envelope, Route
from sbtck.engine.routing import Choice


@dataclass(frozen=True)
class Found:
    """What one attempt's matching and choosing found at a place (Router.match_and_choose)."""

    matched: dict[str, object]  # the routes_matched event's own fields
    routes: tuple[str, ...]
    step: str  # the step of matching that found them
    delayed: bool  # matching found nothing to send by yet
    request: Route | None = None  # the routing request it made, if it made one
    choice: Choice | None = None

    @property
    def why(self) -> str:
        """Why the conversation is delayed: the step of matching, or RTC-4, choosing's last step, found nothing."""
        return self.step if self.delayed else "RTC-4"


@dataclass(frozen=True)
class _Kept:
    stamp: tuple[int, int, bool]
    until_ms: float
    found: Found


class Counting:
    """A chooser that counts the choices it is asked to make, and passes them on."""

    def __init__(self, chooser: Chooser) -> None:
        self.chooser = chooser
        self.asked = 0

    def about(self, instance: str, message: dict[str, object]) -> None:
        self.chooser.about(instance, message)

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        self.asked += 1
        return self.chooser.choose(kind, options, addresses)

    def order(self, kind: str, options: list[str]) -> list[str]:
        self.asked += 1
        return self.chooser.order(kind, options)


class RoutingMemo:
    def __init__(self, chooser: Chooser) -> None:
        # per message and place: what its last attempt found, when it found nothing to send it by
        self.unroutable: dict[tuple[str, bool, int, str, str], _Kept] = {}
        # per place, service and broker instance: the route chosen
        self.decided: dict[tuple[str, str, str, str | None], _Kept] = {}
        self.routes_version = 0
        # the chooser as matching and choosing get it: counting its answers tells a finding that asked none
        self.asking = Counting(chooser)
        # the attempt recall had nothing for, which keep is told of
        self._stamp: tuple[int, int, bool] = (0, 0, False)
        self._place: tuple[str, bool, int, str, str] = ("", False, 0, "", "")
        self._where: tuple[str, str, str, str | None] = ("", "", "", None)
        self._asked = 0

    def routes_changed(self) -> None:
        self.routes_version += 1

    def recall(self, env: Envelope, at: str, table: str, pending: int, has_service: bool, now_ms: int) -> Found | None:
        """What matching and choosing found for ENV at AT with TABLE while it still holds, or None: then the router
        finds anew, and ``keep`` is told what it found."""
        self._stamp = stamp = (self.routes_version, pending, has_service)
        self._place = place = (env.dialog, env.from_target, env.sequence, at, table)
        self._where = where = (at, table, env.to_service, env.to_broker_instance)
        # taken out, and put back only while it holds: a message that goes on leaves nothing behind
        known = self.unroutable.pop(place, None) if self.unroutable else None
        if known is not None and known.stamp == stamp and now_ms < known.until_ms:
            self.unroutable[place] = known
            return known.found
        decided = self.decided.get(where)
        if decided is not None and decided.stamp == stamp and now_ms < decided.until_ms:
            return decided.found
        self._asked = self.asking.asked
        return None

    def keep(self, found: Found, routes: dict[str, Route], now_ms: int) -> Found:
        """FOUND, what the router found after ``recall`` had nothing: kept when it may be."""
        if found.choice is None:
            # a request made changes what the next attempt finds; a broker instance picked is asked again
            if found.request is None if found.delayed else found.step != "RTM-3":
                self.unroutable[self._place] = _Kept(self._stamp, _until(routes, now_ms), found)
        elif self.asking.asked == self._asked:
            self.decided[self._where] = _Kept(self._stamp, _until(routes, now_ms), found)
        return found


def _until(routes: dict[str, Route], now_ms: int) -> float:
    """Until when a table matches as it does now: a route expiring at this instant or later may change it."""
    expiries = [r.expires_ms for r in routes.values() if r.expires_ms is not None and r.expires_ms >= now_ms]
    return min(expiries, default=float("inf"))
