"""One self-contained HTML page from one or more results.json files (and a workload summary).

Everything an implementation said (names, messages, event fields) goes
through ``escape``: a report must not run what an implementation wrote.
The page loads nothing from anywhere: styles and script are inline. Its frame
and the sections of several runs are jinja2 templates with autoescape; the
other sections are still written here, each value through ``escape``.

The first screen answers the first question: a verdict banner (words, icon
and colour), then what changed against a baseline, then every rule at a
glance. A status is never told by colour alone: each has an icon, and its
word for screen readers. Every table has header cells with a scope, every
scrolling block takes the keyboard's focus, and all of it is in ``<main>``
(axe-core checks the page in tests/reports/test_browser.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from sbtck import catalogue, tables
from sbtck.errors import LOG_FOLLOWS
from sbtck.reports import baseline as base
from sbtck.reports import matrix, results, sequence, timeline, workload
from sbtck.reports.results import STATUSES, ScenarioRecord, read
from sbtck.reports.text import LONG, escape, run_labels, shorten
from sbtck.visible import visible


def _shown(value: Any) -> Any:
    """Every value a template prints, before autoescape: an implementation's hidden characters as [U+202E]."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


# The page's frame and the sections of several runs are templates (sbtck/reports/templates/), its style and
# script package files (sbtck/reports/static/) inlined whole: the page loads nothing from anywhere.
PAGES = Environment(
    loader=PackageLoader("sbtck.reports", "templates"), autoescape=True, finalize=_shown, undefined=StrictUndefined
)


@cache
def _static(name: str) -> Markup:
    """A style or script file of the kit, trusted as it is: it is the kit's own, never an implementation's."""
    return Markup(files("sbtck.reports").joinpath("static", name).read_text(encoding="utf-8"))


def _cls(status: str) -> str:
    """A status as a class name: letters, digits and dashes only, whatever a results file says."""
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in status)


VERDICT_ICONS = {
    results.CONFORMS: "✔",
    results.DOES_NOT_CONFORM: "✘",
    results.NOTHING_RAN: "∅",
    results.INTERRUPTED: "⏸",
}


def _icon(status: str) -> str:
    return f'<span aria-hidden="true">{results.ICONS.get(status, "•")}</span>'


def _badge(status: str, text: str | None = None) -> str:
    """A status in colour, icon and words: the words are visible, or read out when ``text`` says something else."""
    words = escape(status) if text is None else f'<span class="sr">{escape(status)}: </span>{escape(text)}'
    return f'<span class="s {_cls(status)}" title="{escape(status)}">{_icon(status)} {words}</span>'


PAGES.filters["cls"] = _cls
PAGES.filters["icon"] = lambda status: results.ICONS.get(status, "•")
PAGES.filters["wrap"] = lambda text: Markup(matrix.label(shorten(str(text), 300)))
RUNS = PAGES.get_template("runs.html.j2").module


def _section(macro: str, *args: Any) -> str:
    """A section of several runs, drawn by the macro of templates/runs.html.j2 so named."""
    drawn: Callable[..., str] = getattr(RUNS, macro)
    return str(drawn(*args))


def anchor(record: ScenarioRecord, run: str = "") -> str:
    """A scenario's id in the page; RUN (``r2-``) tells apart the same scenario of a later run."""
    return run + "sc-" + "".join(ch if ch.isalnum() else "-" for ch in record.id)


def run_key(index: int) -> str:
    """The prefix of a run's anchors: none for the first run, so that its links read as a single run's do."""
    return f"r{index + 1}-" if index else ""


def _area(record: ScenarioRecord) -> str:
    parts = record.feature_path.split("/")
    return parts[-2] if len(parts) > 1 else ""


def _short(record: ScenarioRecord) -> str:
    """``activation/03 [4] name``: scenario numbers restart in every feature file."""
    return f"{_area(record)}/{record.feature_path.split('/')[-1].split('_')[0]} {record.name}"


def _counts(records: list[ScenarioRecord]) -> str:
    counts = Counter(rec.status for rec in records)
    return "".join(
        f'<span class="count" data-status="{escape(s)}" data-count="{counts.get(s, 0)}">{_badge(s)} '
        f"{counts.get(s, 0)}</span>"
        for s in STATUSES
    )


def banner(run: dict[str, Any], records: list[ScenarioRecord], label: str | None = None) -> str:
    """The verdict first: conforms, does not conform, nothing ran, or interrupted."""
    counts = Counter(rec.status for rec in records)
    impl = run.get("implementation", {})
    said = results.verdict(run, [rec.status for rec in records])
    ran = sum(n for s, n in counts.items() if s != results.NOT_APPLICABLE)
    # a run of part of the suite says so whatever its verdict: "on 8 of 203 scenarios, selected by --tags 'X'"
    selection = results.selection_words(run)
    within = f"; {selection}" if selection else ""
    detail = {
        results.CONFORMS: f"on the {ran} scenarios that apply ({counts.get(results.NOT_APPLICABLE, 0)} not "
        f"applicable){within}",
        results.DOES_NOT_CONFORM: ", ".join(f"{counts[s]} {s}" for s in results.AGAINST if counts.get(s))
        + f" of {ran} run{within}",
        results.NOTHING_RAN: f"no scenario applies to the capabilities declared ({len(records)} not applicable)"
        if records
        else "no scenario was collected",
        results.INTERRUPTED: f"the run stopped after {len(records)} scenarios; this is not a verdict",
    }[said]
    name = label or f"{impl.get('name', '?')} {impl.get('version', '')}".strip()
    left = [rec for rec in records if rec.checks[results.LEFT_OUT] or rec.checks["in part"]]
    checks = (
        f"<p>{sum(rec.checks[results.LEFT_OUT] for rec in left)} checks left out and "
        f"{sum(rec.checks['in part'] for rec in left)} made in part, in {len(left)} scenarios: what a real broker "
        "does not show (the engine's reasoning) is not asked of an implementation without decision_trace.</p>"
        if left
        else ""
    )
    return (
        f'<section class="verdict v-{_cls(said)}" aria-label="verdict of {escape(name)}" data-verdict="{escape(said)}">'
        f'<p class="big"><span aria-hidden="true">{VERDICT_ICONS[said]}</span> {escape(name)}: '
        f"{escape(said)}{' on a selection' if run.get('selection') else ''}</p><p>{escape(detail)}</p>{checks}"
        f'<div class="counts">{_counts(records)}</div></section>'
    )


def first_line(record: ScenarioRecord) -> str:
    """A failure's cause in one line: the first line of its message, or its reason."""
    message = str((record.failure or {}).get("message", "")) or record.reason
    return (message.strip().splitlines() or [""])[0]


def _against(records: list[ScenarioRecord]) -> list[ScenarioRecord]:
    return [
        rec for rec in sorted(records, key=lambda rec: (rec.feature_path, rec.line)) if rec.status in results.AGAINST
    ]


def _rule_ids(rules: list[str]) -> str:
    """Rule ids that wrap between ids, never inside one (``ACT-`` / ``07`` at 390 px)."""
    return "".join(f'<span class="rid">{escape(rule)}</span> ' for rule in rules)


def _failure_list(against: list[ScenarioRecord], run: str) -> str:
    items = "".join(
        f'<li>{_badge(rec.status)} <a href="#{anchor(rec, run)}">{escape(shorten(_short(rec), 300))}</a> '
        f'<span class="rules">{_rule_ids(rec.rules)}</span>'
        f'<span class="why">{escape(shorten(first_line(rec), 300))}</span></li>'
        for rec in against
    )
    return f'<ol class="failures">{items}</ol>'


def failures(runs: list[list[ScenarioRecord]], labels: list[str] | None = None) -> str:
    """Right under the verdict: every scenario against the implementation, each with its rules, one line of cause
    and a link to it; of several runs, run by run under each run's label."""
    against = [_against(records) for records in runs]
    total = sum(len(found) for found in against)
    if not total:
        return ""
    if len(runs) == 1 or labels is None:
        return (
            f'<section aria-labelledby="failures"><h2 id="failures">What did not pass ({total})</h2>'
            f"{_failure_list(against[0], '')}</section>"
        )
    parts = [f'<section aria-labelledby="failures"><h2 id="failures">What did not pass ({total}, by run)</h2>']
    for index, (found, label) in enumerate(zip(against, labels, strict=True)):
        parts.append(f"<h3>{escape(shorten(label, 300))} ({len(found)})</h3>")
        parts.append(
            _failure_list(found, run_key(index)) if found else "<p>Every scenario passed or did not apply.</p>"
        )
    return "".join(parts) + "</section>"


def _summary(run: dict[str, Any], label: str) -> str:
    impl = run.get("implementation", {})
    params = "".join(
        f'<tr><th scope="row">{escape(str(k))}</th><td>{escape(str(v))}</td></tr>'
        for k, v in run.get("profile", {}).get("params", {}).items()
    )
    caps = ", ".join(str(c) for c in run.get("profile", {}).get("capabilities", []))
    return (
        f"<h2>{escape(shorten(label, 300))}</h2>"
        f"<p>Kit {escape(str(run.get('kit', {}).get('version', '')))}, "
        f"protocol {escape(str(impl.get('protocol', '')))}, "
        f"IUT spec <code>{escape(str(impl.get('spec', '')))}</code>, "
        + (f"settings from <code>{escape(str(run['settings']))}</code>, " if run.get("settings") else "")
        + f"run started {escape(str(run.get('started', '')))}, "
        f"wall time {escape(str(run.get('wall_time_s', '')))} s.</p>"
        f"<details><summary>Profile ({escape(str(run.get('profile', {}).get('source', '')))}): "
        f'capabilities {escape(caps)}</summary><table><tr><th scope="col">parameter</th>'
        f'<th scope="col">value</th></tr>{params}</table></details>'
    )


def _rule_status(records: list[ScenarioRecord]) -> str:
    if not records:
        return "uncovered"
    return min((rec.status for rec in records), key=lambda s: matrix.SEVERITY.index(s) if s in matrix.SEVERITY else 0)


def _by_rule(records: list[ScenarioRecord]) -> dict[str, list[ScenarioRecord]]:
    found: dict[str, list[ScenarioRecord]] = {}
    for record in records:
        for rule in record.rules:
            found.setdefault(rule, []).append(record)
    return found


def rule_grid(records: list[ScenarioRecord], label: str | None = None, index: int = 0) -> str:
    """Every rule of the catalogue by area, each with the worst status of its scenarios; LABEL names the run
    when the page has several."""
    by_rule = _by_rule(records)
    areas: dict[str, list[str]] = {}
    for rule in catalogue.load().rules.values():
        status = _rule_status(by_rule.get(rule.id, []))
        areas.setdefault(rule.source.split(" / ")[0], []).append(
            f'<li><a href="#rule-{escape(rule.id)}" class="{_cls(status)}" title="{escape(rule.id)}: '
            f'{escape(status)}">{_icon(status)} {escape(rule.id)}<span class="sr"> {escape(status)}</span></a></li>'
        )
    title = "Rules at a glance" + (f": {escape(shorten(label, 300))}" if label else "")
    return f'<h2 id="glance{f"-{index + 1}" if index else ""}">{title}</h2>' + "".join(
        f'<h3>{escape(area)}</h3><ul class="grid">{"".join(cells)}</ul>' for area, cells in areas.items()
    )


def changes(changed: base.Changes, records: list[ScenarioRecord], source: str) -> str:
    """Scenarios whose status changed against the baseline: regressions first, then fixes, then the rest."""
    by_id = {rec.id: rec for rec in records}

    def cell(status: str) -> str:
        return f"<td>{_badge(status) if status != base.ABSENT else 'absent'}</td>"

    def name(c: base.Change) -> str:
        return f'<a href="#{anchor(by_id[c.id])}">{escape(c.id)}</a>' if c.id in by_id else escape(c.id)

    def rows(items: list[base.Change]) -> str:
        return "".join(f"<tr><td>{name(c)}</td>{cell(c.before)}{cell(c.after)}</tr>" for c in items)

    parts = [
        f'<h2 id="changes">Changes against the baseline</h2><p>Baseline: <code>{escape(source)}</code>: '
        f"{escape(changed.summary())}.</p>"
    ]
    groups = (("Regressions", changed.regressions), ("Fixes", changed.fixes), ("Other changes", changed.changed))
    for title, items in groups:
        if items:
            parts.append(
                f'<h3>{title}</h3><table class="changes"><tr><th scope="col">scenario</th><th scope="col">before</th>'
                f'<th scope="col">now</th></tr>{rows(items)}</table>'
            )
    return "".join(parts)


def _rule_cell(records: list[ScenarioRecord], run: str = "", linked: bool = True) -> str:
    """A rule's scenarios in one run, each a badge; a link where the page holds that run's scenario."""
    badges = [
        f'<a href="#{anchor(rec, run)}">{_badge(rec.status, _short(rec))}</a>'
        if linked or rec.status in results.AGAINST
        else _badge(rec.status, _short(rec))
        for rec in records
    ]
    return " ".join(badges) or _badge("uncovered", "no scenario")


def _rule_table(runs: list[list[ScenarioRecord]], labels: list[str]) -> str:
    """Every rule with its text and its scenarios' statuses; of several runs, each run's under its label (the page
    holds every scenario of the first run and what did not pass of the others, which alone are linked)."""
    cat = catalogue.load()
    by_run = [_by_rule(records) for records in runs]
    rows = []
    for entry in cat.rules.values():
        if len(runs) == 1:
            cell = _rule_cell(by_run[0].get(entry.id, []))
        else:
            cell = "".join(
                f'<div class="by-run"><b>{escape(shorten(label, 300))}:</b> '
                f"{_rule_cell(found.get(entry.id, []), run_key(index), index == 0)}</div>"
                for index, (found, label) in enumerate(zip(by_run, labels, strict=True))
            )
        rows.append(
            f'<tr id="rule-{escape(entry.id)}"><th scope="row" class="rid">{escape(entry.id)}</th>'
            f"<td>{escape(entry.text)}"
            f'<div class="tags">{escape(entry.source)}</div></td><td>{cell}</td></tr>'
        )
    return (
        '<h2 id="rules">Rules</h2><table><tr><th scope="col">rule</th><th scope="col">text</th>'
        '<th scope="col">scenarios</th></tr>' + "".join(rows) + "</table>"
    )


def _table(rows: list[list[str]]) -> str:
    """A Gherkin data table: its first row names the columns."""
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


DIFFERING = ' class="d"'
MARKS = {
    "same": "",
    "changed": '<span class="sr"> differs</span> <span aria-hidden="true">✘</span>',
    "missing": " ✘ missing",
    "inserted": " ✘ not expected",
}


def _kind(pair: tables.Pair) -> str:
    if pair.missing:
        return "missing"
    if pair.inserted:
        return "inserted"
    return "changed" if pair.differs else "same"


def _half(side: str, columns: list[str], pairs: list[tables.Pair], name: str) -> str:
    """One side of the aligned tables; a row the other side has and this one lacks stands as an empty row, so
    that the two halves keep their rows level when they sit side by side."""
    rows = []
    for pair in pairs:
        kind = _kind(pair)
        row, number = (pair.want, pair.want_number) if side == "expected" else (pair.got, pair.got_number)
        differing = set(pair.differing()) if pair.differs else set()
        if row is None:
            cells = f'<td colspan="{len(columns)}" class="none">-</td>'
            label = "-"
        else:
            cells = "".join(
                f'<td data-col="{escape(columns[i]) if i < len(columns) else ""}"'
                f"{DIFFERING if i in differing else ''}>{escape(shorten(str(v), 200))}</td>"
                for i, v in enumerate(row)
            )
            label = f"{number}"
        rows.append(f'<tr class="{kind}"><th scope="row">{label}{MARKS[kind]}</th>{cells}</tr>')
    heads = "".join(f'<th scope="col">{escape(c)}</th>' for c in columns)
    return (
        f'<div class="half" tabindex="0" role="region" aria-label="{side} rows of {escape(name)}">'
        f'<table class="vs {side}"><caption>{side}</caption><thead><tr><th scope="col">row</th>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _rows(value: Any) -> list[list[str]]:
    """A table's rows as a results file holds them, as text; anything not a list of lists reads as no row."""
    return [[str(v) for v in row] for row in _listed(value) if isinstance(row, list)]


def side_by_side(table: dict[str, Any], name: str) -> str:
    """The expected rows and the reported ones, aligned by a diff: a changed row and its differing cells, a
    missing and a not expected row are marked. The two halves sit side by side where they fit, one above the
    other where they do not."""
    columns = [str(c) for c in _listed(table.get("columns"))]
    got = _rows(table.get("got"))
    if table.get("expected") is None:  # a check of how many rows: the rows there are, as a table
        return _half("reported", columns, tables.align(got, got), name)
    pairs = tables.align(_rows(table["expected"]), got)
    return f'<div class="pair">{_half("expected", columns, pairs, name)}{_half("reported", columns, pairs, name)}</div>'


def _events(events: list[dict[str, Any]], not_kept: int = 0) -> str:
    lines = []
    for i, e in enumerate(events):
        if not_kept and i == len(events) // 2:
            lines.append(f"... {not_kept} more events, not kept (SBTCK_REPORT_EVENTS) ...")
        extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("at_ms", "kind", "second"))
        lines.append(f"second {e.get('second', 0):>6g}  {str(e.get('kind', '')).replace('_', ' '):<24} {extra}")
    return escape(shorten("\n".join(lines), 20 * LONG))


def failing_messages(record: ScenarioRecord) -> set[str]:
    """The messages a failed check is about, as the sequence picture names them: ``D1:2`` from the first row
    that differs (its dialog from the row or from the step, ``the log for dialog "D1"``), or the step's dialog."""
    failure = record.failure or {}
    step = re.search(r'dialog "([^"]+)"', str(failure.get("step", "")))
    dialog = step.group(1) if step else None
    table = failure.get("table")
    if isinstance(table, dict) and isinstance(table.get("expected"), list):
        columns = [str(c) for c in _listed(table.get("columns"))]
        pair = next((p for p in tables.align(_rows(table["expected"]), _rows(table.get("got"))) if p.differs), None)
        row = None if pair is None else pair.got if pair.got is not None else pair.want
        if row is not None and "message_sequence_number" in columns:
            found = dict(zip(columns, row, strict=False))
            name = found.get("dialog", dialog)
            if name and name != "NULL":
                return {f"{name}:{found['message_sequence_number']}"}
    return {dialog} if dialog and record.status == results.FAILED else set()


def _scenario(record: ScenarioRecord, run: str = "") -> str:
    # a later run's copy of a scenario gets labels of its own: landmarks of one page are told apart by them
    title = record.name + (f" (run {run[1:-1]})" if run else "")
    steps = []
    for step in record.steps:
        steps.append(
            f'<div class="step">{_badge(step.status)} <b>{escape(step.keyword)}</b> {escape(shorten(step.text))}</div>'
        )
        if step.left_out:
            steps.append(f'<div class="step left-out">not checked: {escape(step.left_out)}</div>')
        if step.docstring:
            steps.append(f'<pre class="step" tabindex="0">{escape(shorten(step.docstring))}</pre>')
        if step.datatable:
            steps.append(f'<div class="step">{_table(step.datatable)}</div>')
    failure = ""
    if record.failure:
        table = record.failure.get("table")
        message = str(record.failure.get("message", ""))
        if record.events:  # the event log is shown below: the message's copy of it is not repeated
            message = message.split(LOG_FOLLOWS, 1)[0]
        if isinstance(table, dict):  # the two tables side by side, instead of the message's two dumps
            message = message.split("\n", 1)[0]
        failure = (
            f"<p><b>{'Erred' if record.status == results.ERROR else 'Failed'} at:</b> "
            f"{escape(str(record.failure.get('step', '')))} (line {escape(str(record.failure.get('line', '')))})</p>"
            f'<pre class="cause" tabindex="0">{escape(shorten(message))}</pre>'
            + (side_by_side(table, title) if isinstance(table, dict) else "")
            + f"<p>Rerun: <code>{escape(record.rerun)}</code></p>"
        )
    drawing = timeline.svg(record.events) if _area(record) in ("activation", "periodic") else ""
    picture = sequence.svg(record.events, anchor(record, run), failing_messages(record))
    if picture:
        drawing += (
            f'<div class="wide sequence-region" tabindex="0" role="region" '
            f'aria-label="where the messages of {escape(title)} went">{picture}</div>'
        )
    log = (
        (
            f"<details><summary>Event log ({len(record.events) + record.events_not_kept} events"
            + (f", {record.events_not_kept} not kept" if record.events_not_kept else "")
            + ")</summary>"
            f'<pre tabindex="0">{_events(record.events, record.events_not_kept)}</pre>'
            "</details>"
        )
        if record.events
        else ""
    )
    rules = catalogue.load().rules
    tags = " ".join(
        f'<a href="#rule-{escape(t)}">@{escape(t)}</a>' if t in rules else f"@{escape(t)}" for t in record.tags
    )
    return (
        f'<div class="scenario" id="{anchor(record, run)}" data-status="{escape(record.status)}" '
        f'data-area="{escape(_area(record))}" data-rules="{escape(" ".join(record.rules))}">'
        f'<p>{_badge(record.status)} <b>{escape(record.name)}</b> <span class="tags">{tags}</span></p>'
        + (f'<p class="tags">{escape(record.status)}: {escape(record.reason)}</p>' if record.reason else "")
        + ('<p class="tags"><b>flaky</b>: an earlier attempt of this scenario did not pass</p>' if record.flaky else "")
        + f"{''.join(steps)}{failure}{drawing}{log}</div>"
    )


def _living_specification(records: list[ScenarioRecord], later: list[tuple[str, list[ScenarioRecord]]]) -> str:
    """Every scenario of the first run; of each later run (LATER: its label and records), those that did not
    pass, which its failures link to."""
    features: dict[str, list[ScenarioRecord]] = {}
    for record in sorted(records, key=lambda rec: (rec.feature_path, rec.line)):
        features.setdefault(record.feature_path, []).append(record)
    areas = sorted({_area(rec) for rec in records} | {_area(rec) for _, recs in later for rec in recs})
    filters = (
        '<div id="filters"><input type="search" id="search" placeholder="search the scenarios" aria-label="search">'
        ' <select id="area" aria-label="area"><option value="">every area</option>'
        + "".join(f'<option value="{escape(a)}">{escape(a)}</option>' for a in areas)
        + '</select> <input type="search" id="rule" placeholder="rule, e.g. ACT-06" aria-label="rule" size="10"><br>'
        + "".join(f'<label><input type="checkbox" value="{escape(s)}" checked> {escape(s)}</label>' for s in STATUSES)
        + ' <span class="tags"><span id="shown">0</span> shown</span></div>'
    )
    body = ['<h2 id="specification">Living specification</h2>', filters]
    for path, scenarios in features.items():
        body.append(f'<h3>{escape(scenarios[0].feature_name)} <span class="tags">{escape(path)}</span></h3>')
        body.extend(_scenario(s) for s in scenarios)
    for index, (label, recs) in enumerate(later, start=1):
        against = _against(recs)
        if against:
            body.append(f"<h3>What did not pass in {escape(shorten(label, 300))}</h3>")
            body.extend(_scenario(s, run_key(index)) for s in against)
    return "".join(body)


def _scenario_ids(runs: list[list[ScenarioRecord]]) -> list[ScenarioRecord]:
    """One record per scenario id of any run (the first run's where several have it), in the features' order."""
    found: dict[str, ScenarioRecord] = {}
    for records in runs:
        for record in records:
            found.setdefault(record.id, record)
    return sorted(found.values(), key=lambda rec: (rec.feature_path, rec.line, rec.id))


def interop(runs: list[list[ScenarioRecord]], labels: list[str]) -> str:
    """Per area, the scenarios every run passes (wpt.fyi's interop figure), then each run's passes."""
    by_run = [{rec.id: rec.status for rec in records} for records in runs]
    areas: dict[str, list[str]] = {}
    for record in _scenario_ids(runs):
        areas.setdefault(_area(record), []).append(record.id)

    def figure(passed: int, total: int) -> str:
        return f"{passed} of {total} ({100 * passed // total if total else 0}%)"

    # areas across the top (few, short names), runs down the side (long names wrap): it fits a phone
    every = [
        figure(sum(all(st.get(i) == results.PASSED for st in by_run) for i in ids), len(ids)) for ids in areas.values()
    ]
    each = [
        (label, [figure(sum(statuses.get(i) == results.PASSED for i in ids), len(ids)) for ids in areas.values()])
        for statuses, label in zip(by_run, labels, strict=True)
    ]
    return _section("interop", list(areas), every, each)


def scenario_matrix(runs: list[list[ScenarioRecord]], labels: list[str]) -> str:
    """A scenario per row, a run per column, as wpt.fyi shows tests by browser; a cell links to the run's
    scenario where the page shows it (every scenario of the first run, what did not pass of the others)."""
    by_run = [{rec.id: rec for rec in records} for records in runs]
    rows: list[dict[str, Any]] = []
    area = None
    for record in _scenario_ids(runs):
        cells: list[dict[str, str] | None] = []
        for index, found in enumerate(by_run):
            rec = found.get(record.id)
            linked = rec is not None and (index == 0 or rec.status in results.AGAINST)
            cells.append(
                None if rec is None else {"status": rec.status, "link": anchor(rec, run_key(index)) if linked else ""}
            )
        rows.append({"area": _area(record) if _area(record) != area else "", "name": _short(record), "cells": cells})
        area = _area(record)
    return _section("scenario_matrix", labels, rows, len(runs) + 1)


def render(
    runs: list[tuple[dict[str, Any], list[ScenarioRecord]]],
    work: dict[str, Any] | None = None,
    baseline: tuple[str, list[ScenarioRecord]] | None = None,
) -> str:
    first_records = runs[0][1]
    body = ["<h1>sbtck conformance report</h1>"]
    labels = run_labels([run for run, _ in runs])
    body.extend(banner(run, records, label) for (run, records), label in zip(runs, labels, strict=True))
    several = len(runs) > 1
    body.append(failures([records for _, records in runs], labels))
    if baseline is not None:
        body.append(changes(base.compare(baseline[1], first_records), first_records, baseline[0]))
    if several:
        body.append(interop([records for _, records in runs], labels))
    body.extend(
        rule_grid(records, label if several else None, index)
        for index, ((_, records), label) in enumerate(zip(runs, labels, strict=True))
    )
    body.extend(_summary(run, label) for (run, _), label in zip(runs, labels, strict=True))
    if several:
        body.append(matrix.table(runs))
        body.append(scenario_matrix([records for _, records in runs], labels))
    if work is not None:
        body.append(workload.section(work))
    body.append(_rule_table([records for _, records in runs], labels))
    later = [(label, records) for (_, records), label in zip(runs[1:], labels[1:], strict=True)]
    body.append(_living_specification(first_records, later))
    page = PAGES.get_template("page.html.j2")
    return page.render(css=_static("report.css"), script=_static("report.js"), body=Markup("".join(body)))


def build(
    result_files: list[Path], out: Path, workload_summary: Path | None = None, baseline: Path | None = None
) -> Path:
    runs = [read(path) for path in result_files]
    work = workload.load(workload_summary) if workload_summary else None
    old = (str(baseline), read(baseline)[1]) if baseline is not None else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(runs, work, old))
    return out
