"""A failed or undecided world's record: what it takes to see why, readable without Spark or Parquet.

One record per world, from the world's row of the failures table: its seed, the step at which the two sides
part (the step of the first rule the checks name), the command of that step, the implementation's and the
reference's events and view rows at that step with every differing field named, and the rule. The job writes
them as JSON lines (RECORDS) and as one HTML page (PAGE); `sbtck workload show OUT [SEED]` prints them.

Which fields differ is said by ``sbtck.agreement.field_agrees``, the comparison the stage's verdict uses, on the
events as the stage compares them (``differential.as_compared``: groups and spids by what they refer to, a row by
its declared fields), so a field the verdict takes as agreeing (an address in another case, a list in another
order, a group or spid named otherwise, a column of the implementation's own) is never marked. The
events of a step are paired kind by kind, each with the partner that agrees on the most fields: an event left
without a partner is marked as only on its side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sbtck.agreement import field_agrees
from sbtck.reports.pages import PAGES
from sbtck.workloads.differential import as_compared

RECORDS = "failures.jsonl"
PAGE = "failures.html"
KIND = "sbtck-workload-failure"
# a browser opens a page of a thousand worlds at once; the JSON lines hold every one
PAGE_LIMIT = 1000
IMPLEMENTATION, REFERENCE = "implementation", "reference"

# "RULE at step N: ..." is how the stage's detail names each violation (sbtck/workloads/stage.py), after
# "search budget spent, differing at RULE: " in an undecided world's
_AT_STEP = re.compile(r"(?:^|; |: )([A-Za-z0-9_-]+) at step (\d+):")


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _step_of(detail: str) -> tuple[str | None, int | None]:
    """The first violation the detail names: its rule and step."""
    found = _AT_STEP.search(detail or "")
    return (found.group(1), int(found.group(2))) if found else (None, None)


def _first_parting(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> int | None:
    for index, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            return index
    return None if len(mine) == len(theirs) else min(len(mine), len(theirs))


def _differing(kind: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The fields both carry on which A and B disagree (a field one side lacks is unknown, never a difference)."""
    return sorted(k for k in a.keys() & b.keys() if k != "kind" and not field_agrees(kind, k, a[k], b[k]))


def _pair(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Each side's events with the fields that differ from its partner's, or None when it has no partner."""
    marks_mine: list[list[str] | None] = [None] * len(mine)
    marks_theirs: list[list[str] | None] = [None] * len(theirs)
    free = set(range(len(theirs)))
    for i, event in enumerate(mine):
        kind = event.get("kind", "")
        candidates = [j for j in sorted(free) if theirs[j].get("kind") == kind]
        if not candidates:
            continue
        j = min(candidates, key=lambda j: len(_differing(kind, event, theirs[j])))
        free.discard(j)
        marks_mine[i] = marks_theirs[j] = _differing(kind, event, theirs[j])
    return marks_mine, marks_theirs


def _rows(step: Mapping[str, Any] | None) -> list[Any]:
    result = (step or {}).get("result")
    rows = result.get("rows") if isinstance(result, dict) else None
    return rows if isinstance(rows, list) else []


def _row_marks(mine: list[Any], theirs: list[Any]) -> tuple[list[Any], list[Any]]:
    """Rows compared where they stand, column by column; a row the other side has not is marked None."""
    marks: tuple[list[Any], list[Any]] = ([], [])
    for side, (rows, other) in enumerate(((mine, theirs), (theirs, mine))):
        for n, row in enumerate(rows):
            if n >= len(other) or not isinstance(row, dict) or not isinstance(other[n], dict):
                marks[side].append(None if n >= len(other) or row != other[n] else [])
                continue
            columns = row.keys() | other[n].keys()
            marks[side].append(sorted(c for c in columns if not field_agrees("", c, row.get(c), other[n].get(c))))
    return marks


def _side(step: Mapping[str, Any] | None, events: list[Any], rows: list[Any]) -> dict[str, Any] | None:
    if step is None:
        return None
    return {
        "error": step.get("error"),
        "events": [{"event": e, "differs": m} for e, m in zip(step.get("events") or [], events, strict=True)],
        "rows": [{"row": r, "differs": m} for r, m in zip(_rows(step), rows, strict=True)],
    }


def record(row: Mapping[str, Any]) -> dict[str, Any]:
    """The record of one world from its row of the failures table (FAILURE_COLUMNS of sbtck/workloads/job.py)."""
    script = _loads(row.get("script")) or []
    mine = _loads(row.get("iut_trace")) or []
    theirs = _loads(row.get("reference_trace"))
    rules = list(row.get("rules") or [])
    rule, at = _step_of(str(row.get("detail") or ""))
    if at is None and theirs is not None:
        at = _first_parting(mine, theirs)
    got = mine[at] if at is not None and at < len(mine) else None
    want = theirs[at] if theirs is not None and at is not None and at < len(theirs) else None
    events = _pair(as_compared((got or {}).get("events") or []), as_compared((want or {}).get("events") or []))
    rows = _row_marks(_rows(got), _rows(want))
    return {
        "kind": KIND,
        "seed": int(row["seed"]),
        "outcome": row.get("outcome"),
        "rule": rule or (rules[0] if rules else None),
        "rules": rules,
        "step": at,
        "steps": len(script),
        "command": script[at] if at is not None and at < len(script) else None,
        "refused_differs": got is not None and want is not None and (got["error"] is None) != (want["error"] is None),
        IMPLEMENTATION: _side(got, events[0], rows[0]),
        REFERENCE: _side(want, events[1], rows[1]),
        "detail": row.get("detail") or "",
    }


def differing_columns(rec: Mapping[str, Any]) -> list[str]:
    """Every field or column the record marks as differing, on either side."""
    found: set[str] = set()
    for side in (IMPLEMENTATION, REFERENCE):
        for item in [*((rec.get(side) or {}).get("events") or []), *((rec.get(side) or {}).get("rows") or [])]:
            found.update(item["differs"] or [])
    return sorted(found)


# --------------------------------------------------------------------------------------------- writing, reading
def write(records: Iterable[Mapping[str, Any]], folder: Path) -> int:
    """RECORDS and PAGE in FOLDER, in the order given; how many worlds. Streamed: the page shows the first
    PAGE_LIMIT worlds, the JSON lines all of them."""
    shown: list[Mapping[str, Any]] = []
    count = 0
    with (folder / RECORDS).open("w") as file:
        for rec in records:
            file.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
            count += 1
            if len(shown) < PAGE_LIMIT:
                shown.append(rec)
    (folder / PAGE).write_text(page(shown, count))
    return count


def read(folder: Path) -> Iterator[dict[str, Any]]:
    with (folder / RECORDS).open() as file:
        for line in file:
            if line.strip():
                yield json.loads(line)


# ------------------------------------------------------------------------------------------------- the terminal
def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _fields(item: Mapping[str, Any], marks: list[str] | None, skip: tuple[str, ...] = ("kind",)) -> str:
    # a differing field between >> and <<: the terminal may have no colour, and a copied line keeps the mark; not in
    # [brackets], which a list's value prints in too (a clean-room author could not find the difference by eye)
    shown = [f">>{k}={_value(v)}<<" if marks and k in marks else f"{k}={_value(v)}" for k, v in sorted(item.items())]
    return " ".join(s for s, k in zip(shown, sorted(item), strict=True) if k not in skip)


def summary_line(rec: Mapping[str, Any]) -> str:
    where = "at no single step" if rec.get("step") is None else f"at step {rec['step']}"
    command = (rec.get("command") or {}).get("kind", "?")
    columns = ", ".join(differing_columns(rec)) or "-"
    rule = rec.get("rule") or "-"
    return f"seed {rec['seed']:<8} {rec['outcome']:<9} {rule:<10} {where} ({command}); differs: {columns}"


def text(rec: Mapping[str, Any]) -> str:
    lines = [
        f"world {rec['seed']}: {rec['outcome']}, rule {rec.get('rule') or '-'} (all: {', '.join(rec['rules']) or '-'})",
        f"the sides part at step {rec.get('step')} of {rec.get('steps')}"
        + ("" if rec.get("step") is not None else " (no step: see the detail)"),
    ]
    if rec.get("command"):
        lines.append(f"command: {rec['command'].get('kind')} {_fields(rec['command'], None)}")
    lines.append("a field between >> and << differs from the other side's; ! marks what the other side lacks")
    for side in (IMPLEMENTATION, REFERENCE):
        shown = rec.get(side)
        lines.append(f"{side}:")
        if shown is None:
            lines.append("  (nothing to show: " + ("no step" if side == IMPLEMENTATION else "no reference trace") + ")")
            continue
        if shown["error"] is not None or rec.get("refused_differs"):
            lines.append(f"  {'>>refused<<' if rec.get('refused_differs') else 'refused'}: {shown['error']}")
        for item in shown["events"]:
            mark = "!" if item["differs"] is None else " "
            lines.append(f" {mark}{item['event'].get('kind')} {_fields(item['event'], item['differs'])}")
        for item in shown["rows"]:
            mark = "!" if item["differs"] is None else " "
            row = item["row"]
            lines.append(f" {mark}row " + (_fields(row, item["differs"], ()) if isinstance(row, dict) else _value(row)))
        if not shown["events"] and not shown["rows"]:
            lines.append("  (no events)")
    lines.append(f"detail: {rec.get('detail')}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ the page
# the markup is sbtck/reports/templates/failures.html.j2, printed through the report page's one escaping
def _table(items: list[Any], key: str) -> dict[str, Any]:
    columns = sorted({c for item in items if isinstance(item[key], dict) for c in item[key]})
    rows = []
    for item in items:
        value, marks = item[key], item["differs"]
        whole = None if isinstance(value, dict) else _value(value)
        cells = [
            {"text": _value(value[c]) if c in value else "", "differs": bool(marks and c in marks)}
            for c in (columns if isinstance(value, dict) else ())
        ]
        rows.append({"only": marks is None, "whole": whole, "cells": cells})
    return {"columns": columns, "rows": rows}


def _world(rec: Mapping[str, Any]) -> dict[str, Any]:
    sides = []
    for side in (IMPLEMENTATION, REFERENCE):
        shown = rec.get(side)
        if shown is not None:
            shown = {
                "error": None if shown["error"] is None else str(shown["error"]),
                "events": _table(shown["events"], "event"),
                "rows": _table(shown["rows"], "row"),
            }
        sides.append({"title": side.capitalize(), "shown": shown})
    return {
        "seed": rec["seed"],
        "summary": summary_line(rec),
        "outcome": str(rec["outcome"]),
        "rule": str(rec.get("rule") or "-"),
        "step": str(rec.get("step")),
        "steps": str(rec.get("steps")),
        "rules": ", ".join(rec["rules"]) or "-",
        "differing": ", ".join(differing_columns(rec)) or "-",
        "command": _value(rec.get("command")),
        "sides": sides,
        "detail": str(rec.get("detail")),
    }


def page(records: list[Mapping[str, Any]], total: int | None = None) -> str:
    total = len(records) if total is None else total
    drawn = PAGES.get_template("failures.html.j2").render(
        worlds=[_world(r) for r in records], total=total, records=RECORDS
    )
    return drawn + "\n"
