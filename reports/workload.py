"""The summary of a randomized workload run, as the report shows it.

The Spark stage writes this JSON beside its Parquet tables:

    {"kind": "sbtck-workload-summary", "worlds": 1000, "conversations": 120000,
     "failed_worlds": 2, "duration_s": 61.5,
     "violations": {"ACT-10": 2},
     "capabilities": {"activation, routing": 990, "activation": 10},
     "reproducers": [{"rule": "ACT-10", "seed": 17, "path": "reproducers/seed-17.feature"}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sbtck.errors import WorkloadSummaryError
from sbtck.reports.text import escape

KIND = "sbtck-workload-summary"


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkloadSummaryError(f"workload summary {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise WorkloadSummaryError(f"workload summary {path}: not a {KIND} (its 'kind' is {data.get('kind')!r})")
    for key in ("worlds", "conversations", "failed_worlds", "duration_s"):
        if not isinstance(data.get(key), (int, float)) or data[key] < 0:
            raise WorkloadSummaryError(f"workload summary {path}: {key} must be a number of 0 or more")
    undecided = data.get("undecided_worlds", 0)  # written since the search of allowed histories
    if not isinstance(undecided, int) or isinstance(undecided, bool) or undecided < 0:
        raise WorkloadSummaryError(f"workload summary {path}: undecided_worlds must be a whole number of 0 or more")
    return data


def _reproducer(path: str) -> str:
    """A link to a reproducer the stage wrote beside the summary: a relative path, never a scheme or another host
    (a summary is a file anyone can edit; ``javascript:`` would run when clicked)."""
    first = path.split("/", 1)[0]
    if not path or path.startswith(("/", "\\")) or ":" in first:
        return escape(path)
    return f'<a href="{escape(path)}">{escape(path)}</a>'


def section(data: dict[str, Any]) -> str:
    duration = float(data["duration_s"]) or 1e-9
    rows = (
        "".join(
            f'<tr><td><a href="#rule-{escape(str(rule))}">{escape(str(rule))}</a></td><td>{int(count)}</td></tr>'
            for rule, count in sorted(dict(data.get("violations", {})).items())
        )
        or '<tr><td colspan="2">none</td></tr>'
    )
    links = (
        "".join(
            f"<li>{_reproducer(str(r.get('path', '')))} "
            f"(seed {escape(str(r.get('seed', '?')))}, {escape(str(r.get('rule', '')))})</li>"
            for r in data.get("reproducers", [])
        )
        or "<li>none</li>"
    )
    mix = (
        "".join(
            f"<tr><td>{escape(str(caps))}</td><td>{int(count)}</td></tr>"
            for caps, count in dict(data.get("capabilities", {})).items()
        )
        or '<tr><td colspan="2">not recorded</td></tr>'
    )
    return (
        '<h2 id="workload">Randomized workload</h2>'
        f"<p>{int(data['worlds'])} worlds, {int(data['conversations'])} conversations, "
        f"{int(data['failed_worlds'])} failing worlds{_undecided(data)}, in {float(data['duration_s']):.1f} s: "
        f"{int(data['worlds']) / duration:.1f} worlds/s, "
        f"{int(data['conversations']) / duration:.0f} conversations/s.</p>"
        '<table><tr><th scope="col">capabilities the worlds asked for</th><th scope="col">worlds</th></tr>'
        f"{mix}</table>"
        f'<table><tr><th scope="col">rule violated</th><th scope="col">worlds</th></tr>{rows}</table>'
        f"<p>Reproducers, shrunk to the smallest failing script:</p><ul>{links}</ul>"
    )


def _undecided(data: dict[str, Any]) -> str:
    """The worlds the search of allowed histories could not settle within its budget (no failure)."""
    count = int(data.get("undecided_worlds") or 0)
    return f" and {count} undecided (the search's budget ran out)" if count else ""
