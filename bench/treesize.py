"""Peak resident memory of a process and all its descendants (a Spark driver, its JVM, its Python workers)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return out


def tree_rss(root: int) -> int:
    """Bytes resident in ROOT and its descendants now."""
    children, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        with contextlib.suppress(OSError):  # it ended meanwhile
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    return total


class PeakSampler:
    """Samples tree_rss(ROOT) every EVERY_S seconds in a thread; .peak is the largest seen."""

    def __init__(self, root: int, every_s: float = 0.5) -> None:
        self.root, self.every_s, self.peak = root, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, tree_rss(self.root))
