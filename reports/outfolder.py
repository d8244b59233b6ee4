"""The folders the kit writes into (--out): only ones it made, and one command at a time in each.

A folder is the kit's when it is new, empty, or holds the mark the kit left
there when it first wrote into it (``REPORT`` for sbtck run and sbtck report,
``sbtck/workloads/output.py``'s own for the workload stage); the filesystem
root and the home folder never are. Every command that writes into a folder
holds a lock on the folder itself (flock on the directory, so that taking it
adds no file to an empty folder) while it writes: sbtck run, sbtck report,
sbtck workload and pytest with ``--sbtck-out``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

from sbtck import lock

# flock on the folder itself where the platform has it; elsewhere (Windows) filelock's file inside the folder,
# removed when the lock goes (sbtck/lock.py), so that the command imports and locks everywhere Python runs
FLOCK = importlib.util.find_spec("fcntl") is not None

# left in a folder the first time sbtck run or sbtck report writes there
REPORT = ".sbtck-report"
# names a killed run may leave in a folder it had not yet marked, and the lock file a kit leaves while it
# writes there (and earlier kits left behind)
LEFT_BY_THE_KIT = (".staging-", lock.RUN_LOCK)
TAKEN = "another sbtck command is writing there; wait for it, or name another --out"

# the folders this process holds, each with its open directory: sbtck run holds its --out, and the plugin, in the
# same process, writes there under the same lock (flock would refuse a second descriptor of one process)
_held: set[Path] = set()


def refused(out: Path, mark: str) -> str | None:
    """Why the kit may not write into OUT (the folder a command marks with MARK), or None."""
    out = out.resolve()
    if out == Path(out.anchor) or out == Path.home().resolve():
        return "the filesystem root or the home folder; name a folder of its own for the report"
    if not out.is_dir():
        return None  # missing: the kit makes it; a file: the command says so in its own words
    if (out / mark).is_file() and not (out / mark).is_symlink():
        return None
    others = sorted(p.name for p in out.iterdir() if not p.name.startswith(LEFT_BY_THE_KIT))
    if others:
        return (
            f"holds files sbtck did not write there ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}; "
            f"no {mark}); name a new or empty folder"
        )
    return None


def claim(out: Path, mark: str) -> None:
    """Marks OUT (made if missing) as the kit's; never through a link planted under the mark's name."""
    out.mkdir(parents=True, exist_ok=True)
    os.close(os.open(out / mark, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))


@contextlib.contextmanager
def locked(out: Path) -> Iterator[bool]:
    """Holds OUT's lock while the block writes there: False when another command holds it."""
    out = out.resolve()
    if out in _held:
        yield True
        return
    with _flock(out) if FLOCK else lock.held(out) as taken:
        if not taken:
            yield False
            return
        _held.add(out)
        try:
            yield True
        finally:
            _held.discard(out)


@contextlib.contextmanager
def _flock(out: Path) -> Iterator[bool]:
    import fcntl  # POSIX only: FLOCK says whether it is there

    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # the lock goes with it


def hold(out: Path) -> bool:
    """Takes OUT's lock (made if missing) until the process ends: for a command with one folder and many exits."""
    out.mkdir(parents=True, exist_ok=True)
    taking = locked(out)
    if not taking.__enter__():
        taking.__exit__(None, None, None)
        return False
    return True
