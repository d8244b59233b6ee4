"""``xdist_group`` kept on one worker under pytest 9.2 (scripts/test.sh's ``--dist loadgroup``).

pytest-xdist (3.8) names a grouped test ``NODEID@GROUP`` by writing ``item._nodeid``; pytest 9.2 reads a node's
id from ``item._id`` instead, so the suffix was lost and loadgroup scheduled grouped tests like any others: the
Spark tests started a session on each worker and test_shrink made its reproducers twice (some 225 s of CI each).
Where xdist's suffix did not take, this gives it again the way the running pytest reads it.
"""

from __future__ import annotations

import pytest


def _group(item: pytest.Item) -> str | None:
    names = sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    )
    return "_".join(names) or None


def keep_together(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Called from a ``trylast`` collection hook: after xdist's, which names the group where it still can."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup only
        return
    for item in items:
        group = _group(item)
        if group is None or item.nodeid.endswith(f"@{group}"):
            continue
        _rename(item, f"{item.nodeid}@{group}")


def _rename(item: pytest.Item, nodeid: str) -> None:
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2: the id a node reports, kept as parsed
    except ImportError:  # older pytest reads _nodeid, which xdist sets itself
        item._nodeid = nodeid  # type: ignore[attr-defined]  # xdist's own way, for the pytest it was written for
        return
    item._id = NodeId.parse(nodeid)
