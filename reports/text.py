"""Text from an implementation, made safe and readable for the page.

``escape`` is html.escape that also shows, as ``[U+202E]``, the control
and bidirectional-formatting characters that would otherwise reorder or
hide what the page shows: the page's templates print every value through it
(``pages.py``); ``shorten`` keeps the page small when a value is
huge (results.json keeps the whole value).
"""

from __future__ import annotations

import html
from typing import Any

from sbtck.visible import visible

LONG = 4000


def escape(value: object, quote: bool = True) -> str:
    return visible(html.escape(str(value), quote))


def shorten(text: str, limit: int = LONG) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" … [{len(text) - limit} more characters; the whole value is in results.json]"


def run_labels(runs: list[dict[str, Any]]) -> list[str]:
    """A name for each run; runs of implementations with the same name are told apart by spec and start."""
    names = [
        f"{run.get('implementation', {}).get('name', '?')} {run.get('implementation', {}).get('version', '')}".strip()
        for run in runs
    ]
    return [
        f"{name} (run {i + 1}: {run.get('implementation', {}).get('spec', '?')}, {run.get('started', '?')})"
        if names.count(name) > 1
        else name
        for i, (name, run) in enumerate(zip(names, runs, strict=True))
    ]
