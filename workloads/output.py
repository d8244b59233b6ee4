"""The output folder: filled in a hidden staging folder, moved into place only when the job has finished.

A folder with summary.json is complete; one with INCOMPLETE is not, and
that file says why. Nothing in between is ever left looking complete.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

SUMMARY = "summary.json"
INCOMPLETE = "INCOMPLETE"
PARTS = ("worlds", "failures", "reproducers", SUMMARY)


class OutputError(ValueError):
    pass


class Output:
    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.staging = self.folder / f".staging-{uuid.uuid4().hex[:8]}"

    def prepare(self) -> None:
        """Take the folder over: an earlier result stops looking complete before this job starts."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = self.folder / ".sbtck-probe"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise OutputError(f"--out {self.folder}: cannot write there ({exc.strerror or exc})") from None
        (self.folder / SUMMARY).unlink(missing_ok=True)
        for stale in self.folder.glob(".staging-*"):  # left by a job that was killed
            shutil.rmtree(stale, ignore_errors=True)
        self.mark_incomplete("the workload job is running (or was stopped before it finished)")
        self.staging.mkdir()

    def mark_incomplete(self, why: str) -> None:
        (self.folder / INCOMPLETE).write_text(why.rstrip() + "\n")

    def part(self, name: str) -> Path:
        return self.staging / name

    def finish(self, summary: dict[str, Any]) -> None:
        (self.staging / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
        for name in PARTS:
            old = self.folder / name
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
        for name in PARTS:
            if (self.staging / name).exists():
                (self.staging / name).rename(self.folder / name)
        shutil.rmtree(self.staging, ignore_errors=True)
        (self.folder / INCOMPLETE).unlink(missing_ok=True)

    def fail(self, why: str) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        self.mark_incomplete(f"the workload job did not finish: {why}")
