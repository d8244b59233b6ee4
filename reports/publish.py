"""Every output of a run, written so that a broken run never replaces a finished run's report.

The files are built in a staging folder and moved in one by one: a reader
sees the old report or the new one, never half of each. A run that
collected nothing leaves the folder as it was; an interrupted run too, and
its partial report (whose verdict says *interrupted*) goes beside it, to
``OUT.interrupted``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sbtck.reports import cucumber, html, junit, outfolder, results


def build(folder: Path, run: dict[str, Any], records: list[results.ScenarioRecord], baseline: Path | None) -> None:
    """results.json, and the others made from it: cucumber.json, junit.xml, index.html."""
    written = folder / "results.json"
    results.write(written, run, records)
    cucumber.write(records, folder / "cucumber.json")
    junit.write(*results.read(written), folder / "junit.xml")
    html.build([written], folder / "index.html", baseline=baseline)


def publish(
    out: Path,
    run: dict[str, Any],
    records: list[results.ScenarioRecord],
    baseline: Path | None,
    say: Callable[[str], None],
) -> Path | None:
    """Where the report went (None when nothing was written); ``say`` tells the user why, when not to ``out``."""
    if not records:
        say(f"sbtck: no scenario ran; the report in {out} is left as it was")
        return None
    target = out
    if run.get("interrupted"):
        target = interrupted(out)
        if target.is_symlink():  # planted beside --out: the partial report would land wherever it points
            say(f"sbtck: the run was interrupted; {target} is a symbolic link, so its partial report is not written")
            return None
        if (target.exists() and not target.is_dir()) or outfolder.refused(target, outfolder.REPORT):
            # a file or a folder of the user's by that name keeps its files; the partial report goes beside it
            target = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
        outfolder.claim(target, outfolder.REPORT)
        say(
            f"sbtck: the run was interrupted after {len(records)} scenarios; the report in {out} is left "
            f"as it was, this run's partial report is in {target}"
        )
    staged(target, lambda staging: build(staging, run, records, baseline))
    return target


def staged(target: Path, make: Callable[[Path], None], stale: tuple[str, ...] = ()) -> None:
    """The files MAKE writes into a folder, moved into TARGET once all are written; the names in STALE, outputs
    of an earlier report this one does not make, removed so that none is taken for this one's."""
    target.mkdir(parents=True, exist_ok=True)
    # a new folder of its own (never one of that name planted there), and each file moved over the name in
    # --out replaces the name, never a file a planted link points to
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target))
    try:
        make(staging)
        made = sorted(staging.iterdir())
        for path in made:
            os.replace(path, target / path.name)
        for name in set(stale) - {path.name for path in made}:
            (target / name).unlink(missing_ok=True)  # a link planted by that name goes, never what it names
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def interrupted(out: Path) -> Path:
    return out.with_name(out.name + ".interrupted")
