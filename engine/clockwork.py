"""Work that falls due at a time: the engine's only notion of time passing."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True, init=False)
class _Due:
    at_ms: int
    seq: int
    action: Callable[[], None]
    cancelled: bool = False

    def __init__(self, at_ms: int, seq: int, action: Callable[[], None], cancelled: bool = False) -> None:
        self.at_ms, self.seq, self.action, self.cancelled = at_ms, seq, action, cancelled


class Clockwork:
    """A time-ordered agenda.

    Items due at the same millisecond run in the order they were scheduled,
    which is what makes a run replay exactly.
    """

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        # (at_ms, seq, due): the heap compares the two integers in C; seq is unique, so it never reaches the due
        self._agenda: list[tuple[int, int, _Due]] = []
        self._settling: list[Callable[[], None]] = []
        self._seq = 0

    def at(self, at_ms: int, action: Callable[[], None]) -> _Due:
        if at_ms < self.now_ms:
            at_ms = self.now_ms
        self._seq += 1
        due = _Due(at_ms, self._seq, action)
        heapq.heappush(self._agenda, (at_ms, self._seq, due))
        return due

    def soon(self, action: Callable[[], None]) -> _Due:
        return self.at(self.now_ms, action)

    def settle(self, action: Callable[[], None]) -> None:
        """Run ``action`` once nothing else is due at this instant.

        A queue monitor looks at a queue once the readers have done what they
        do at once (a procedure that just committed RECEIVEs again in the same
        instant), not half-way through.
        """
        self._settling.append(action)

    def run_until(self, until_ms: int) -> None:
        """Run everything due up to and including ``until_ms``, then stand there."""
        if until_ms < self.now_ms:
            raise ValueError(f"time cannot go back: now is {self.now_ms} ms, asked for {until_ms} ms")
        agenda, settling = self._agenda, self._settling
        while True:
            if agenda and agenda[0][0] <= self.now_ms:
                self._run_next()
            elif settling:
                settling.pop(0)()
            elif agenda and agenda[0][0] <= until_ms:
                self._run_next()
            else:
                break
        self.now_ms = until_ms

    def _run_next(self) -> None:
        due = heapq.heappop(self._agenda)[2]
        if not due.cancelled:
            self.now_ms = due.at_ms
            due.action()

    def run_pending(self) -> None:
        self.run_until(self.now_ms)
