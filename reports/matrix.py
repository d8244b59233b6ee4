"""Rules down the side, runs across the top: one cell per rule and run, as on wpt.fyi."""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

from sbtck import catalogue
from sbtck.fixtures.results import ScenarioRecord

# the worst status of a cell decides its colour
SEVERITY = ["failed", "error", "unexpected pass", "expected failure", "not applicable", "passed"]


def _cell(records: list[ScenarioRecord]) -> str:
    if not records:
        return '<td class="uncovered">-</td>'
    counts = Counter(r.status for r in records)
    worst = min(counts, key=lambda s: SEVERITY.index(s) if s in SEVERITY else 0)
    text = ", ".join(
        f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: SEVERITY.index(kv[0]) if kv[0] in SEVERITY else 0)
    )
    return f'<td class="{escape(worst.replace(" ", "-"))}">{escape(text)}</td>'


def table(runs: list[tuple[dict[str, Any], list[ScenarioRecord]]]) -> str:
    header = "".join(
        f"<th>{escape(str(run.get('implementation', {}).get('name', '?')))} "
        f"{escape(str(run.get('implementation', {}).get('version', '')))}</th>"
        for run, _ in runs
    )
    rows = []
    for rule in catalogue.load().rules.values():
        cells = "".join(_cell([r for r in records if rule.id in r.rules]) for _, records in runs)
        rows.append(f'<tr><td><a href="#rule-{escape(rule.id)}">{escape(rule.id)}</a></td>{cells}</tr>')
    return (
        f'<h2 id="matrix">Rules by run</h2><table class="matrix"><tr><th>rule</th>{header}</tr>{"".join(rows)}</table>'
    )
