"""Rules down the side, runs across the top: one cell per rule and run, as on wpt.fyi."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sbtck import catalogue
from sbtck.reports.results import ICONS, ScenarioRecord
from sbtck.reports.text import escape, run_labels

# the worst status of a cell decides its colour and icon (the icon says it without colour)
SEVERITY = ["failed", "error", "unexpected pass", "expected failure", "not applicable", "differs", "passed"]


def _cell(records: list[ScenarioRecord]) -> str:
    if not records:
        return '<td class="uncovered"><span aria-hidden="true">?</span> no scenario</td>'
    counts = Counter(r.status for r in records)
    worst = min(counts, key=lambda s: SEVERITY.index(s) if s in SEVERITY else 0)
    text = ", ".join(
        f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: SEVERITY.index(kv[0]) if kv[0] in SEVERITY else 0)
    )
    return f'<td class="{escape(worst.replace(" ", "-"))}">{ICONS.get(worst, "")} {escape(text)}</td>'


def label(text: str) -> str:
    """A run's label for a column head: it may wrap after an underscore (``ignores_max_queue_readers``), so that
    the column fits a phone without breaking letter by letter."""
    return escape(text).replace("_", "_<wbr>")


def table(runs: list[tuple[dict[str, Any], list[ScenarioRecord]]]) -> str:
    header = "".join(f'<th scope="col">{label(name)}</th>' for name in run_labels([run for run, _ in runs]))
    rows = []
    for rule in catalogue.load().rules.values():
        cells = "".join(_cell([r for r in records if rule.id in r.rules]) for _, records in runs)
        rows.append(
            f'<tr><th scope="row" class="rid"><a href="#rule-{escape(rule.id)}">{escape(rule.id)}</a></th>{cells}</tr>'
        )
    return (
        '<h2 id="matrix">Rules by run</h2><div class="wide" tabindex="0" role="region" aria-label="rules by run">'
        f'<table class="matrix"><tr><th scope="col">rule</th>{header}</tr>{"".join(rows)}</table></div>'
    )
