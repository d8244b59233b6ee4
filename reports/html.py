"""One self-contained HTML page from one or more results.json files.

Everything an implementation said (names, messages, event fields) goes
through ``escape``: a report must not run what an implementation wrote.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

from fixtures.results import STATUSES, ScenarioRecord, read
from sbtck import catalogue

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em;color:#222}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
.s{display:inline-block;padding:0 6px;border-radius:3px;font-size:.85em;white-space:nowrap}
.passed{background:#d4f4d4}.failed,.error{background:#f8d0d0}.not-applicable{background:#e4e4e4}
.expected-failure{background:#fde9c4}.unexpected-pass{background:#cfe0ff}.uncovered{background:#fff3b0}
.scenario{border:1px solid #ddd;border-radius:4px;margin:.6em 0;padding:.4em .8em}
.step{margin-left:1em;font-family:ui-monospace,monospace;white-space:pre-wrap}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap}
.tags{color:#666;font-size:.85em}#filters label{margin-right:1em}
"""

SCRIPT = """
function applyFilter(){
  const on=new Set([...document.querySelectorAll('#filters input:checked')].map(i=>i.value));
  document.querySelectorAll('.scenario').forEach(s=>{s.hidden=!on.has(s.dataset.status)});
}
document.querySelectorAll('#filters input').forEach(i=>i.addEventListener('change',applyFilter));
"""


def _cls(status: str) -> str:
    return status.replace(" ", "-")


def _badge(status: str, text: str | None = None) -> str:
    return f'<span class="s {_cls(status)}">{escape(text or status)}</span>'


def _anchor(record: ScenarioRecord) -> str:
    return "sc-" + "".join(ch if ch.isalnum() else "-" for ch in record.id)


def _summary(run: dict[str, Any], records: list[ScenarioRecord]) -> str:
    counts = Counter(r.status for r in records)
    impl = run.get("implementation", {})
    verdict = "conforms" if not counts["failed"] and not counts["error"] else "does not conform"
    params = "".join(
        f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>"
        for k, v in run.get("profile", {}).get("params", {}).items()
    )
    status_cells = "".join(f"<td>{_badge(s)} {counts.get(s, 0)}</td>" for s in STATUSES)
    return (
        f"<h1>sbtck conformance report: {escape(str(impl.get('name', '?')))} "
        f"{escape(str(impl.get('version', '')))}</h1>"
        f"<p><b>Verdict:</b> {escape(verdict)} on the {len(records)} scenarios run. "
        f"Kit {escape(str(run.get('kit', {}).get('version', '')))}, "
        f"protocol {escape(str(impl.get('protocol', '')))}, "
        f"IUT spec <code>{escape(str(impl.get('spec', '')))}</code>, "
        f"run started {escape(str(run.get('started', '')))}, "
        f"wall time {escape(str(run.get('wall_time_s', '')))} s.</p>"
        f"<table><tr>{status_cells}</tr></table>"
        f"<details><summary>Profile values ({escape(str(run.get('profile', {}).get('source', '')))})</summary>"
        f"<table>{params}</table></details>"
    )


def _short(record: ScenarioRecord) -> str:
    """``activation/03 [4] name``: scenario numbers restart in every feature file."""
    parts = record.feature_path.split("/")
    return f"{'/'.join(parts[-2:-1])}/{parts[-1].split('_')[0]} {record.name}"


def _rule_table(records: list[ScenarioRecord]) -> str:
    cat = catalogue.load()
    by_rule: dict[str, list[ScenarioRecord]] = {}
    for record in records:
        for rule in record.rules:
            by_rule.setdefault(rule, []).append(record)
    rows = []
    for entry in cat.rules.values():
        checks = by_rule.get(entry.id, [])
        cell = " ".join(f'<a href="#{_anchor(r)}">{_badge(r.status, _short(r))}</a>' for r in checks) or _badge(
            "uncovered", "no scenario"
        )
        rows.append(
            f'<tr id="rule-{escape(entry.id)}"><td><b>{escape(entry.id)}</b></td><td>{escape(entry.text)}'
            f'<div class="tags">{escape(entry.source)}</div></td><td>{cell}</td></tr>'
        )
    return "<h2>Rules</h2><table><tr><th>rule</th><th>text</th><th>scenarios</th></tr>" + "".join(rows) + "</table>"


def _table(rows: list[list[str]]) -> str:
    return (
        "<table>"
        + "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        + "</table>"
    )


def _events(record: ScenarioRecord) -> str:
    lines = []
    for e in record.events:
        extra = ", ".join(
            f"{k}={v}" for k, v in e.items() if k not in ("at_ms", "kind", "second", "instance", "database")
        )
        lines.append(f"second {e.get('second', 0):>6g}  {str(e.get('kind', '')).replace('_', ' '):<24} {extra}")
    return escape("\n".join(lines))


def _scenario(record: ScenarioRecord) -> str:
    steps = []
    for step in record.steps:
        steps.append(f'<div class="step">{_badge(step.status)} <b>{escape(step.keyword)}</b> {escape(step.text)}</div>')
        if step.docstring:
            steps.append(f'<pre class="step">{escape(step.docstring)}</pre>')
        if step.datatable:
            steps.append(f'<div class="step">{_table(step.datatable)}</div>')
    failure = ""
    if record.failure:
        failure = (
            f"<p><b>Failed at:</b> {escape(str(record.failure.get('step', '')))} "
            f"(line {escape(str(record.failure.get('line', '')))})</p>"
            f"<pre>{escape(str(record.failure.get('message', '')))}</pre>"
            f"<p>Rerun: <code>{escape(record.rerun)}</code></p>"
        )
    log = (
        f"<details><summary>Event log ({len(record.events)} events)</summary><pre>{_events(record)}</pre></details>"
        if record.events
        else ""
    )
    tags = " ".join(
        f'<a href="#rule-{escape(t)}">@{escape(t)}</a>' if t in catalogue.load().rules else f"@{escape(t)}"
        for t in record.tags
    )
    return (
        f'<div class="scenario" id="{_anchor(record)}" data-status="{escape(record.status)}">'
        f'<p>{_badge(record.status)} <b>{escape(record.name)}</b> <span class="tags">{tags}</span></p>'
        f"{''.join(steps)}{failure}{log}</div>"
    )


def render(run: dict[str, Any], records: list[ScenarioRecord]) -> str:
    features: dict[str, list[ScenarioRecord]] = {}
    for record in sorted(records, key=lambda r: (r.feature_path, r.line)):
        features.setdefault(record.feature_path, []).append(record)
    body = [_summary(run, records), _rule_table(records), "<h2>Living specification</h2>"]
    body.append(
        '<div id="filters">'
        + "".join(f'<label><input type="checkbox" value="{escape(s)}" checked> {escape(s)}</label>' for s in STATUSES)
        + "</div>"
    )
    for path, scenarios in features.items():
        body.append(f'<h3>{escape(scenarios[0].feature_name)} <span class="tags">{escape(path)}</span></h3>')
        body.extend(_scenario(s) for s in scenarios)
    embedded = escape(json.dumps({"scenarios": len(records)}))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<title>sbtck report</title><style>{CSS}</style></head><body data-run="{embedded}">'
        + "".join(body)
        + f"<script>{SCRIPT}</script></body></html>"
    )


def build(results: list[Path], out: Path) -> Path:
    run: dict[str, Any] = {}
    records: list[ScenarioRecord] = []
    for path in results:
        run_i, recs = read(path)
        run = run or run_i
        records.extend(recs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(run, records))
    return out
