"""One writer at a time in a folder: the lock a command holds on its --out while it writes there.

filelock's, which works wherever Python does (fcntl made the command
unimportable on Windows). A finished run leaves no lock file in its --out:
the file is removed while still locked, and a command that locked a file
that was removed under it (it opened the name just before) counts the lock
as held by another. A second command that finds the lock held is refused,
never made to wait or left to replace the first's report.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

RUN_LOCK = ".sbtck-run.lock"  # in the folder, while a command writes there


@contextlib.contextmanager
def held(folder: Path) -> Iterator[bool]:
    """Whether FOLDER's lock was taken (held until the block ends), or another holds it."""
    path = folder / RUN_LOCK
    locked: list[os.stat_result] = []

    def still_named(fd: int) -> None:
        mine = os.fstat(fd)
        try:
            named = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        if named is None or not os.path.samestat(mine, named):  # removed by the holder before us: it is not ours
            raise BlockingIOError(f"{path} was removed while it was being locked")
        locked.append(mine)

    lock = FileLock(path, blocking=False, on_acquired=still_named)
    try:
        lock.acquire()
    except (Timeout, BlockingIOError):
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            if os.path.samestat(os.stat(path, follow_symlinks=False), locked[-1]):
                path.unlink()  # before the lock goes: no moment when the name is free but the file still there
        lock.release()
