"""Rules down the side, runs across the top: one cell per rule and run, as on wpt.fyi."""

from __future__ import annotations

from collections import Counter
from typing import Any

from markupsafe import Markup

from sbtck import catalogue
from sbtck.reports.pages import draw
from sbtck.reports.results import ICONS, ScenarioRecord
from sbtck.reports.text import run_labels

# the worst status of a cell decides its colour and icon (the icon says it without colour)
SEVERITY = ["failed", "error", "unexpected pass", "expected failure", "not applicable", "differs", "passed"]


def _rank(status: str) -> int:
    return SEVERITY.index(status) if status in SEVERITY else 0


def _cell(records: list[ScenarioRecord]) -> dict[str, str] | None:
    """A rule's cell of one run: its worst status (as a class), that status's icon and how many of each; none
    where no scenario of the run checks the rule."""
    if not records:
        return None
    counts = Counter(r.status for r in records)
    worst = min(counts, key=_rank)
    return {
        "worst": worst.replace(" ", "-"),
        "icon": ICONS.get(worst, ""),
        "counts": ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: _rank(kv[0]))),
    }


def table(runs: list[tuple[dict[str, Any], list[ScenarioRecord]]]) -> Markup:
    rows = [
        (rule.id, [_cell([r for r in records if rule.id in r.rules]) for _, records in runs])
        for rule in catalogue.load().rules.values()
    ]
    return draw("matrix.html.j2", "rules_by_run", run_labels([run for run, _ in runs]), rows)
