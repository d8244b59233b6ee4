"""Peak memory of a process and all its descendants (a Spark driver, its JVM, its Python workers).

Each process counts its proportional set size (PSS): a page shared by N
processes counts 1/N in each. Spark's Python workers are forked from one
daemon and share most of their pages with it and with each other; summing
their resident sizes counted those pages once per worker, and a moment with
a worker more (one starting as another ends) read as hundreds of MiB more.
Where a kernel has no smaps_rollup, the resident size is what is counted.
"""

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


def _sizes(pid: int) -> tuple[int, int]:
    """PID's proportional and resident set sizes, in bytes."""
    resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return resident, resident
    pss = next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), resident)
    return pss, resident


def tree_memory(root: int) -> tuple[int, int]:
    """Bytes ROOT and its descendants use now: their proportional set sizes summed, and their resident sizes."""
    children, pss, resident, todo = _children(), 0, 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        with contextlib.suppress(OSError):  # it ended meanwhile
            p, r = _sizes(pid)
            pss, resident = pss + p, resident + r
    return pss, resident


class PeakSampler:
    """Samples tree_memory(ROOT) every EVERY_S seconds in a thread; .peak is the largest PSS seen.

    ``.peak_resident`` is the largest sum of resident sizes, which counts shared pages once per process.
    """

    def __init__(self, root: int, every_s: float = 0.5) -> None:
        self.root, self.every_s, self.peak, self.peak_resident = root, every_s, 0, 0
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
            pss, resident = tree_memory(self.root)
            self.peak, self.peak_resident = max(self.peak, pss), max(self.peak_resident, resident)
