"""Every output of a run, written so that no crash or signal loses the run.

results.json is written first, as soon as the scenarios end, and the
earlier report's other files go with it, so that none says another verdict
beside it; each file made from it (cucumber.json, junit.xml, index.html) is
built from it as read back, checked against the results schema, in a
staging folder and moved in once whole. A builder that fails leaves the
others; its traceback goes to OUT/sbtck-errors.log and the run exits 3. A
run that collected nothing leaves the folder as it was; an interrupted run
too, and its partial report (whose verdict says *interrupted*) goes beside
it, to ``OUT.interrupted``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sbtck.errors import BuildFailed
from sbtck.reports import cucumber, html, junit, messages, outfolder, results, summary
from sbtck.visible import visible

# the files of a report besides results.json, each with what builds it from the checked results
BUILT_FROM_RESULTS = ("cucumber.json", messages.NAME, "junit.xml", "index.html", summary.NAME)
# in --out, a builder's traceback when it failed
ERROR_LOG = "sbtck-errors.log"


def build(target: Path, run: dict[str, Any], records: list[results.ScenarioRecord], baseline: Path | None) -> None:
    """results.json into TARGET first, then each file made from it as read back, checked (cucumber.json,
    cucumber.ndjson, junit.xml, index.html, summary.md), each moved in once it is whole. A builder that fails
    leaves the others; BuildFailed names it and the log of its traceback."""
    with tempfile.TemporaryDirectory(prefix=".staging-", dir=target) as staging:
        written = Path(staging) / "results.json"
        results.write(written, run, records)
        os.replace(written, target / "results.json")
        # the earlier report's files go at once: none is left beside this run's results to say another verdict
        for name in (*BUILT_FROM_RESULTS, ERROR_LOG):
            (target / name).unlink(missing_ok=True)
        try:
            checked_run, checked = results.read(target / "results.json")
        except Exception as exc:  # what the run recorded breaks the results schema: said, never a crash
            raise BuildFailed(_logged(target, "results.json", exc)) from None
        makers: dict[str, Callable[[Path], object]] = {
            "cucumber.json": lambda path: cucumber.write(checked, path),
            messages.NAME: lambda path: messages.write(checked_run, checked, path),
            "junit.xml": lambda path: junit.write(checked_run, checked, path),
            "index.html": lambda path: html.build([target / "results.json"], path, baseline=baseline),
            summary.NAME: lambda path: summary.write(path.parent, checked_run, checked, target / "index.html"),
        }
        failed = []
        for name in BUILT_FROM_RESULTS:
            try:
                makers[name](Path(staging) / name)
                os.replace(Path(staging) / name, target / name)
            except Exception as exc:  # a builder's defect: the others are still written
                failed.append(_logged(target, name, exc))
        if failed:
            raise BuildFailed("; ".join(failed))


def _logged(target: Path, name: str, exc: Exception) -> str:
    """The traceback of a builder's failure, appended to the log in TARGET; one line saying so."""
    with (target / ERROR_LOG).open("a", encoding="utf-8") as log:
        log.write(f"{name}:\n{''.join(traceback.format_exception(exc))}\n")
    cause = visible(f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    return (
        f"{name} could not be built ({cause}); results.json and the other files are in {target}, "
        f"the traceback in {target / ERROR_LOG}"
    )


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
    target.mkdir(parents=True, exist_ok=True)
    build(target, run, records, baseline)
    summary.to_step_summary(target / summary.NAME)
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
