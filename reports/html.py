"""One self-contained HTML page from one or more results.json files (and a workload summary).

This module shapes what the page shows (which rows, which status, which words); the markup is in the jinja2
templates of sbtck/reports/templates/ (``pages.py``), which escape everything an implementation said (names,
messages, event fields) and show its hidden characters as [U+202E]: a report must not run what an implementation
wrote. The page loads nothing from anywhere: styles and script are inline.

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
from pathlib import Path
from typing import Any

from markupsafe import Markup

from sbtck import catalogue, tables
from sbtck.errors import LOG_FOLLOWS
from sbtck.reports import baseline as base
from sbtck.reports import matrix, results, sequence, timeline, workload
from sbtck.reports.pages import PAGES, draw, static
from sbtck.reports.results import STATUSES, ScenarioRecord, read
from sbtck.reports.text import LONG, run_labels, shorten

# the icon that says a verdict without its colour
VERDICT_ICONS = {
    results.CONFORMS: "✔",
    results.DOES_NOT_CONFORM: "✘",
    results.NOTHING_RAN: "∅",
    results.INTERRUPTED: "⏸",
}


def _report(macro: str, *args: Any) -> Markup:
    """A section or piece of the page, drawn by the macro of templates/report.html.j2 so named."""
    return draw("report.html.j2", macro, *args)


def _section(macro: str, *args: Any) -> Markup:
    """A section of several runs, drawn by the macro of templates/runs.html.j2 so named."""
    return draw("runs.html.j2", macro, *args)


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


def banner(run: dict[str, Any], records: list[ScenarioRecord], label: str | None = None) -> Markup:
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
    left = [rec for rec in records if rec.checks[results.LEFT_OUT] or rec.checks["in part"]]
    return _report(
        "banner",
        {
            "said": said,
            "icon": VERDICT_ICONS[said],
            "name": label or f"{impl.get('name', '?')} {impl.get('version', '')}".strip(),
            "selection": bool(run.get("selection")),
            "detail": detail,
            "left": len(left),
            "left_out": sum(rec.checks[results.LEFT_OUT] for rec in left),
            "in_part": sum(rec.checks["in part"] for rec in left),
            "counts": [(status, counts.get(status, 0)) for status in STATUSES],
        },
    )


def first_line(record: ScenarioRecord) -> str:
    """A failure's cause in one line: the first line of its message, or its reason."""
    message = str((record.failure or {}).get("message", "")) or record.reason
    return (message.strip().splitlines() or [""])[0]


def _against(records: list[ScenarioRecord]) -> list[ScenarioRecord]:
    return [
        rec for rec in sorted(records, key=lambda rec: (rec.feature_path, rec.line)) if rec.status in results.AGAINST
    ]


def _failure_items(against: list[ScenarioRecord], run: str) -> list[dict[str, Any]]:
    return [
        {
            "status": rec.status,
            "anchor": anchor(rec, run),
            "name": shorten(_short(rec), 300),
            "rules": rec.rules,
            "why": shorten(first_line(rec), 300),
        }
        for rec in against
    ]


def failures(runs: list[list[ScenarioRecord]], labels: list[str] | None = None) -> Markup:
    """Right under the verdict: every scenario against the implementation, each with its rules, one line of cause
    and a link to it; of several runs, run by run under each run's label."""
    against = [_against(records) for records in runs]
    total = sum(len(found) for found in against)
    if not total:
        return Markup()
    if len(runs) == 1 or labels is None:
        return _report("failures", total, [("", _failure_items(against[0], ""))], False)
    groups = [
        (label, _failure_items(found, run_key(index)))
        for index, (found, label) in enumerate(zip(against, labels, strict=True))
    ]
    return _report("failures", total, groups, True)


def _summary(run: dict[str, Any], label: str) -> Markup:
    impl = run.get("implementation", {})
    profile = run.get("profile", {})
    return _report(
        "summary",
        {
            "label": label,
            "kit": str(run.get("kit", {}).get("version", "")),
            "protocol": str(impl.get("protocol", "")),
            "spec": str(impl.get("spec", "")),
            "settings": str(run["settings"]) if run.get("settings") else "",
            "started": str(run.get("started", "")),
            "wall_time": str(run.get("wall_time_s", "")),
            "source": str(profile.get("source", "")),
            "capabilities": ", ".join(str(c) for c in profile.get("capabilities", [])),
            "params": [(str(k), str(v)) for k, v in profile.get("params", {}).items()],
        },
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


def rule_grid(records: list[ScenarioRecord], label: str | None = None, index: int = 0) -> Markup:
    """Every rule of the catalogue by area, each with the worst status of its scenarios; LABEL names the run
    when the page has several."""
    by_rule = _by_rule(records)
    areas: dict[str, list[tuple[str, str]]] = {}
    for rule in catalogue.load().rules.values():
        areas.setdefault(rule.source.split(" / ")[0], []).append((rule.id, _rule_status(by_rule.get(rule.id, []))))
    return _report("rule_grid", areas, label, index)


def changes(changed: base.Changes, records: list[ScenarioRecord], source: str) -> Markup:
    """Scenarios whose status changed against the baseline: regressions first, then fixes, then the rest."""
    by_id = {rec.id: rec for rec in records}

    def shaped(items: list[base.Change]) -> list[dict[str, Any]]:
        return [
            {
                "id": c.id,
                "anchor": anchor(by_id[c.id]) if c.id in by_id else "",
                "before": None if c.before == base.ABSENT else c.before,
                "after": None if c.after == base.ABSENT else c.after,
            }
            for c in items
        ]

    groups = [
        ("Regressions", shaped(changed.regressions)),
        ("Fixes", shaped(changed.fixes)),
        ("Other changes", shaped(changed.changed)),
    ]
    return _report("changes", source, changed.summary(), groups)


def _rule_scenarios(records: list[ScenarioRecord], run: str = "", linked: bool = True) -> list[dict[str, str]]:
    """A rule's scenarios in one run; each linked where the page holds that run's scenario (LINKED: all of them)."""
    return [
        {
            "status": rec.status,
            "name": _short(rec),
            "link": anchor(rec, run) if linked or rec.status in results.AGAINST else "",
        }
        for rec in records
    ]


def _rule_table(runs: list[list[ScenarioRecord]], labels: list[str]) -> Markup:
    """Every rule with its text and its scenarios' statuses; of several runs, each run's under its label (the page
    holds every scenario of the first run and what did not pass of the others, which alone are linked)."""
    by_run = [_by_rule(records) for records in runs]
    rows = [
        {
            "id": entry.id,
            "text": entry.text,
            "source": entry.source,
            "runs": [
                (label, _rule_scenarios(found.get(entry.id, []), run_key(index), index == 0))
                for index, (found, label) in enumerate(zip(by_run, labels, strict=True))
            ],
        }
        for entry in catalogue.load().rules.values()
    ]
    return _report("rule_table", rows, len(runs) > 1)


def _kind(pair: tables.Pair) -> str:
    if pair.missing:
        return "missing"
    if pair.inserted:
        return "inserted"
    return "changed" if pair.differs else "same"


def _half(side: str, columns: list[str], pairs: list[tables.Pair]) -> list[dict[str, Any]]:
    """One side's rows of the aligned tables: a row the other side has and this one lacks has no cells."""
    rows: list[dict[str, Any]] = []
    for pair in pairs:
        row, number = (pair.want, pair.want_number) if side == "expected" else (pair.got, pair.got_number)
        differing = set(pair.differing()) if pair.differs else set()
        cells = (
            None
            if row is None
            else [(columns[i] if i < len(columns) else "", i in differing, str(v)) for i, v in enumerate(row)]
        )
        rows.append({"kind": _kind(pair), "number": "-" if row is None else f"{number}", "cells": cells})
    return rows


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _rows(value: Any) -> list[list[str]]:
    """A table's rows as a results file holds them, as text; anything not a list of lists reads as no row."""
    return [[str(v) for v in row] for row in _listed(value) if isinstance(row, list)]


def side_by_side(table: dict[str, Any], name: str) -> Markup:
    """The expected rows and the reported ones, aligned by a diff: a changed row and its differing cells, a
    missing and a not expected row are marked. The two halves sit side by side where they fit, one above the
    other where they do not."""
    columns = [str(c) for c in _listed(table.get("columns"))]
    got = _rows(table.get("got"))
    if table.get("expected") is None:  # a check of how many rows: the rows there are, as a table
        return _report("side_by_side", columns, None, _half("reported", columns, tables.align(got, got)), name)
    pairs = tables.align(_rows(table["expected"]), got)
    expected, reported = _half("expected", columns, pairs), _half("reported", columns, pairs)
    return _report("side_by_side", columns, expected, reported, name)


def _events(events: list[dict[str, Any]], not_kept: int = 0) -> str:
    lines = []
    for i, e in enumerate(events):
        if not_kept and i == len(events) // 2:
            lines.append(f"... {not_kept} more events, not kept (SBTCK_REPORT_EVENTS) ...")
        extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("at_ms", "kind", "second"))
        lines.append(f"second {e.get('second', 0):>6g}  {str(e.get('kind', '')).replace('_', ' '):<24} {extra}")
    return shorten("\n".join(lines), 20 * LONG)


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


def _card(record: ScenarioRecord, run: str = "") -> dict[str, Any]:
    """What a scenario's card shows (templates/report.html.j2, ``scenario``)."""
    # a later run's copy of a scenario gets labels of its own: landmarks of one page are told apart by them
    title = record.name + (f" (run {run[1:-1]})" if run else "")
    card: dict[str, Any] = {
        "anchor": anchor(record, run),
        "status": record.status,
        "area": _area(record),
        "rules": record.rules,
        "name": record.name,
        "title": title,
        "tags": [(tag, tag in catalogue.load().rules) for tag in record.tags],
        "reason": record.reason,
        "flaky": record.flaky,
        "steps": record.steps,
        "failure": None,
        "timeline": timeline.svg(record.events) if _area(record) in ("activation", "periodic") else "",
        "sequence": sequence.svg(record.events, anchor(record, run), failing_messages(record)),
        "log": _events(record.events, record.events_not_kept) if record.events else None,
        "log_count": len(record.events) + record.events_not_kept,
        "not_kept": record.events_not_kept,
    }
    if record.failure:
        table = record.failure.get("table")
        message = str(record.failure.get("message", ""))
        if record.events:  # the event log is shown below: the message's copy of it is not repeated
            message = message.split(LOG_FOLLOWS, 1)[0]
        if isinstance(table, dict):  # the two tables side by side, instead of the message's two dumps
            message = message.split("\n", 1)[0]
        card.update(
            failure={"step": str(record.failure.get("step", "")), "line": str(record.failure.get("line", ""))},
            erred=record.status == results.ERROR,
            message=message,
            tables=side_by_side(table, title) if isinstance(table, dict) else "",
            rerun=record.rerun,
        )
    return card


def _living_specification(records: list[ScenarioRecord], later: list[tuple[str, list[ScenarioRecord]]]) -> Markup:
    """Every scenario of the first run; of each later run (LATER: its label and records), those that did not
    pass, which its failures link to."""
    features: dict[str, list[ScenarioRecord]] = {}
    for record in sorted(records, key=lambda rec: (rec.feature_path, rec.line)):
        features.setdefault(record.feature_path, []).append(record)
    areas = sorted({_area(rec) for rec in records} | {_area(rec) for _, recs in later for rec in recs})
    shown = [(scenarios[0].feature_name, path, [_card(s) for s in scenarios]) for path, scenarios in features.items()]
    failed = [
        (label, [_card(s, run_key(index)) for s in _against(recs)]) for index, (label, recs) in enumerate(later, 1)
    ]
    return _report("living_specification", areas, STATUSES, shown, failed)


def _scenario_ids(runs: list[list[ScenarioRecord]]) -> list[ScenarioRecord]:
    """One record per scenario id of any run (the first run's where several have it), in the features' order."""
    found: dict[str, ScenarioRecord] = {}
    for records in runs:
        for record in records:
            found.setdefault(record.id, record)
    return sorted(found.values(), key=lambda rec: (rec.feature_path, rec.line, rec.id))


def interop(runs: list[list[ScenarioRecord]], labels: list[str]) -> Markup:
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


def scenario_matrix(runs: list[list[ScenarioRecord]], labels: list[str]) -> Markup:
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
    labels = run_labels([run for run, _ in runs])
    body = [banner(run, records, label) for (run, records), label in zip(runs, labels, strict=True)]
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
    return page.render(css=static("report.css"), script=static("report.js"), body=Markup("").join(body))


def build(
    result_files: list[Path], out: Path, workload_summary: Path | None = None, baseline: Path | None = None
) -> Path:
    runs = [read(path) for path in result_files]
    work = workload.load(workload_summary) if workload_summary else None
    old = (str(baseline), read(baseline)[1]) if baseline is not None else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(runs, work, old))
    return out
