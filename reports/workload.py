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

from markupsafe import Markup

from sbtck.errors import WorkloadSummaryError
from sbtck.reports.pages import draw

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


def _linked(path: str) -> bool:
    """A reproducer the stage wrote beside the summary is linked by a relative path, never a scheme or another host
    (a summary is a file anyone can edit; ``javascript:`` would run when clicked)."""
    first = path.split("/", 1)[0]
    return not (not path or path.startswith(("/", "\\")) or ":" in first)


def _reproducer(path: str) -> Markup:
    """A reproducer's path, linked where it is relative."""
    return draw("workload.html.j2", "reproducer", path, _linked(path))


def section(data: dict[str, Any]) -> Markup:
    duration = float(data["duration_s"]) or 1e-9
    return draw(
        "workload.html.j2",
        "section",
        {
            "worlds": int(data["worlds"]),
            "conversations": int(data["conversations"]),
            "failed_worlds": int(data["failed_worlds"]),
            # the worlds the search of allowed histories could not settle within its budget (no failure)
            "undecided": int(data.get("undecided_worlds") or 0),
            "duration": f"{float(data['duration_s']):.1f}",
            "worlds_per_s": f"{int(data['worlds']) / duration:.1f}",
            "conversations_per_s": f"{int(data['conversations']) / duration:.0f}",
            "capabilities": [(str(caps), int(count)) for caps, count in dict(data.get("capabilities", {})).items()],
            "violations": [(str(rule), int(count)) for rule, count in sorted(dict(data.get("violations", {})).items())],
            "reproducers": [
                {
                    "path": str(r.get("path", "")),
                    "linked": _linked(str(r.get("path", ""))),
                    "seed": str(r.get("seed", "?")),
                    "rule": str(r.get("rule", "")),
                }
                for r in data.get("reproducers", [])
            ],
        },
    )
