"""A progress line for the driver: worlds done out of all, failures so far by rule id."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 30


def line(done: int, total: int, by_rule: dict[str, int], elapsed_s: float, conversations: int = 0) -> str:
    share = done / total if total else 1.0
    bar = "#" * int(share * WIDTH) + "." * (WIDTH - int(share * WIDTH))
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    rules = ", ".join(f"{rule} {n}" for rule, n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
    return f"[{bar}] {done}/{total} worlds ({share:4.0%}), {conversations} conversations, {rate:.0f} worlds/s" + (
        f" | failing by rule: {rules}" if rules else ""
    )


class Progress:
    """Polls a reading function from a thread and redraws; on a file that is no terminal, writes a line now and then."""

    def __init__(
        self,
        read: Callable[[], tuple[int, dict[str, int], int]],
        total: int,
        stream: TextIO | None = None,
        every_s: float = 0.5,
        text: Callable[[], str] | None = None,
    ) -> None:
        self.read, self.total, self.stream = read, total, stream or sys.stderr
        self.text = text  # the line itself, when it is not worlds checked (e.g. while they are shrunk)
        self.every_s = every_s if self.stream.isatty() else max(every_s, 5.0)
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.draw(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.draw()

    def draw(self, final: bool = False) -> None:
        if self.text is not None:
            text = self.text()
        else:
            done, rules, conversations = self.read()
            text = line(done, self.total, rules, time.monotonic() - self.start, conversations)
        if self.stream.isatty():
            self.stream.write("\r" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
