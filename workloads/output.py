"""The output folder: filled in a hidden staging folder, moved into place only when the job has finished.

A folder with summary.json and no INCOMPLETE is complete; INCOMPLETE says
that the latest job is running or did not finish, and why. The kit only
ever deletes what it wrote itself:

- it takes a folder only when the folder is new, empty, or marked as its own
  (MARKER, whose manifest lists every file the last finished job wrote), and
  never the filesystem root or the home folder;
- it holds a lock on the marker while it runs, so two jobs never share one;
- while a job runs, the previous job's files wait in a hidden folder; a job
  that finishes replaces exactly the files of the manifest, one that does
  not puts the previous ones back, so a failed rerun leaves the last
  complete result whole beside an INCOMPLETE that says what happened.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import IO, Any

from sbtck.errors import OutputError

SUMMARY = "summary.json"
INCOMPLETE = "INCOMPLETE"
MARKER = ".sbtck-workload"


class Output:
    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        job = uuid.uuid4().hex[:8]
        self.staging = self.folder / f".staging-{job}"
        self.previous = self.folder / f".previous-{job}"
        self._lock: IO[str] | None = None

    # ------------------------------------------------------------- the folder
    def _refuse(self, why: str) -> OutputError:
        return OutputError(f"--out {self.folder}: {why}")

    def _manifest(self) -> list[str]:
        try:
            data = json.loads((self.folder / MARKER).read_text() or "{}")
        except (OSError, ValueError):
            return []
        files = data.get("files", []) if isinstance(data, dict) else []
        return [f for f in files if isinstance(f, str) and ".." not in Path(f).parts and not Path(f).is_absolute()]

    def prepare(self) -> None:
        """Take the folder, lock it, and set the previous job's files aside."""
        if self.folder == Path(self.folder.anchor) or self.folder == Path.home().resolve():
            raise self._refuse("the filesystem root or the home folder; name a folder of its own for the results")
        if self.folder.exists() and not self.folder.is_dir():
            raise self._refuse("a file; name a folder")
        ours = (self.folder / MARKER).is_file() and not (self.folder / MARKER).is_symlink()
        if self.folder.is_dir() and any(self.folder.iterdir()) and not ours:
            raise self._refuse(
                f"not empty, and not made by sbtck workload (it has no {MARKER}); name a new or empty folder"
            )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # never through a link planted under the marker's name: the manifest would be written over its target
            fd = os.open(self.folder / MARKER, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
            self._lock = os.fdopen(fd, "a+")
        except OSError as exc:
            raise self._refuse(f"cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise self._refuse("another sbtck workload job is writing there; wait for it or name another") from None
        # with the lock held, hidden folders are left by jobs that were killed: theirs, so the kit's to clear
        for stale in [*self.folder.glob(".staging-*"), *self.folder.glob(".previous-*")]:
            if stale.is_symlink():  # not the kit's: the link goes, what it points to stays
                stale.unlink()
            elif stale.name.startswith(".staging-"):
                shutil.rmtree(stale, ignore_errors=True)
            else:
                self._restore(stale)
        self._move(self._manifest(), self.folder, self.previous)
        self.mark_incomplete("the workload job is running (or was stopped before it finished)")
        self.staging.mkdir()

    @staticmethod
    def _linked(root: Path, name: str) -> bool:
        """Does NAME under ROOT pass through a symbolic link (its folders, or itself)?"""
        path = root
        for part in Path(name).parts:
            path = path / part
            if path.is_symlink():
                return True
        return False

    def _move(self, files: list[str], source: Path, target: Path) -> None:
        # what passes through a link is not the kit's to move: a planted `docs` link would take a user's file
        files = [name for name in files if not self._linked(source, name) and not self._linked(target, name)]
        for name in files:
            old = source / name
            if old.is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(old, target / name)
        for name in sorted({str(Path(f).parent) for f in files if Path(f).parent != Path(".")}, reverse=True):
            folder = source / name
            if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                folder.rmdir()

    def _restore(self, previous: Path) -> None:
        files = [str(p.relative_to(previous)) for p in previous.rglob("*") if p.is_file()]
        self._move(files, previous, self.folder)
        shutil.rmtree(previous, ignore_errors=True)

    def mark_incomplete(self, why: str) -> None:
        path = self.folder / INCOMPLETE
        if path.is_symlink():  # a planted link goes; what it points to is never written
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as file:
            file.write(why.rstrip() + "\n")

    def part(self, name: str) -> Path:
        return self.staging / name

    # ------------------------------------------------------------ the outcome
    def finish(self, summary: dict[str, Any]) -> None:
        (self.staging / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
        written = sorted(str(p.relative_to(self.staging)) for p in self.staging.rglob("*") if p.is_file())
        self._move(written, self.staging, self.folder)
        shutil.rmtree(self.staging, ignore_errors=True)
        shutil.rmtree(self.previous, ignore_errors=True)
        self._write_marker(written)
        (self.folder / INCOMPLETE).unlink(missing_ok=True)
        self._unlock()

    def fail(self, why: str) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        kept = self.previous.is_dir() and any(self.previous.rglob("*"))
        if self.previous.is_dir():
            self._restore(self.previous)
        self.mark_incomplete(
            f"the workload job did not finish: {why}"
            + ("\nsummary.json and the tables beside this file are the previous, finished job's." if kept else "")
        )
        self._unlock()

    def _write_marker(self, files: list[str]) -> None:
        assert self._lock is not None
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(json.dumps({"made_by": "sbtck workload", "files": files}, indent=1) + "\n")
        self._lock.flush()

    def _unlock(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
