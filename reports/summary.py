"""summary.md: a run in Markdown, for a CI job's page or a pull-request comment.

Written beside the report, and appended to ``$GITHUB_STEP_SUMMARY`` when it
is set (GitHub Actions shows that file on the job's page). It says the
verdict (with the selection, for a run of part of the suite), the count of
each status and what did not pass, each with its one-line cause and the
command that reruns it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from sbtck.reports import results
from sbtck.reports.html import VERDICT_ICONS, first_line
from sbtck.visible import visible

NAME = "summary.md"
# GitHub Actions' variable naming the file a step appends its summary to
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# a summary lists this many of the scenarios that did not pass, then says how many more the report has
MOST = 50


def _code(text: str) -> str:
    """TEXT as inline code, whatever backticks it holds."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render(run: dict[str, Any], records: list[results.ScenarioRecord], report: Path | None = None) -> str:
    statuses = [rec.status for rec in records]
    verdict = results.verdict(run, statuses)
    impl = run.get("implementation", {})
    name = visible(f"{impl.get('name', '?')} {impl.get('version', '')}".strip())
    selection = results.selection_words(run)
    lines = [f"## {VERDICT_ICONS[verdict]} {name}: {verdict}{' ' + selection if selection else ''}", ""]
    lines += [
        f"{len(records)} scenarios of sbtck {run.get('kit', {}).get('version', '?')} against "
        f"{_code(visible(str(impl.get('spec', '?'))))}, started {run.get('started', '?')}, "
        f"{run.get('wall_time_s', '?')} s." + (f" Report: {_code(str(report))}" if report else ""),
        "",
        "| status | scenarios |",
        "| --- | ---: |",
    ]
    counts = Counter(statuses)
    order = [s for s in results.STATUSES if s in counts] + sorted(set(counts) - set(results.STATUSES))
    lines += [f"| {results.ICONS.get(s, '')} {s} | {counts[s]} |" for s in order]
    against = [rec for rec in records if rec.status in results.AGAINST]
    if against:
        lines += ["", f"### What did not pass ({len(against)})", ""]
        for rec in against[:MOST]:
            cause = visible(first_line(rec)) or rec.status
            lines.append(f"- {results.ICONS[rec.status]} **{rec.status}** {_code(visible(rec.id))}: {_code(cause)}")
            if rec.rerun:
                lines.append(f"  rerun: {_code(visible(rec.rerun))}")
        if len(against) > MOST:
            lines.append(f"- and {len(against) - MOST} more: see the report")
    return "\n".join(lines) + "\n"


def write(folder: Path, run: dict[str, Any], records: list[results.ScenarioRecord], report: Path | None) -> Path:
    path = folder / NAME
    path.write_text(render(run, records, report), encoding="utf-8")
    return path


def to_step_summary(summary: Path) -> None:
    """Appends SUMMARY to the file $GITHUB_STEP_SUMMARY names, when it names one."""
    target = os.environ.get(STEP_SUMMARY)
    if target:
        with open(target, "a", encoding="utf-8") as page:
            page.write(summary.read_text(encoding="utf-8"))
