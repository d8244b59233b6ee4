"""How a check step says that what the implementation showed is not what the scenario expected: one way for all.

The error carries both tables (the page sets them side by side) and its message names the first differing cell
and shows the rows in the feature's notation, never a Python repr. The scenario's log is not pasted into a
view check's message: every report shows the scenario's events once, apart from the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sbtck import tables
from sbtck.errors import RowsDiffer, ViewDiffers
from sbtck.steps.cells import cell
from sbtck.steps.world import World
from sbtck.views import VIEW_COLUMNS


def text_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as the terminal shows them: columns padded, between bars."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return "\n".join("  | " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |" for r in rows)


def shown(world: World, columns: Sequence[str], rows: list[dict[str, Any]]) -> list[list[str]]:
    """COLUMNS of ROWS (a view's, or what a check expects of one) as cells in the feature's notation."""
    return [[cell(column, row.get(column), world.clock.start_ms) for column in columns] for row in rows]


def count_differs(
    world: World, view: str, want: int, rows: list[dict[str, Any]], about: str = "", on: str | None = None
) -> ViewDiffers:
    """VIEW showed ROWS (those the check counts, ABOUT a queue or an address, ON an instance) for WANT rows."""
    columns = list(VIEW_COLUMNS.get(view, ())) or (list(rows[0]) if rows else [])
    got = shown(world, columns, rows)
    said = "one row" if want == 1 else f"{want} rows"
    where = (f" {about}" if about else "") + f" in {view}" + (f" on {on}" if on else "")
    return ViewDiffers(
        f"expected {said}{where}, got {len(rows)}" + (f"\n{text_table([columns, *got])}" if rows else ""),
        columns,
        None,
        got,
    )


def rows_differ(
    what: str,
    columns: Sequence[str],
    want: Sequence[Sequence[str]],
    got: Sequence[Sequence[str]],
    kind: type[RowsDiffer] = ViewDiffers,
    after: str = "",
) -> RowsDiffer:
    """WHAT (``sys.routes of shop on sql1``) showed GOT for WANT: the first differing cell, then both tables.
    AFTER follows the tables (a log check's log)."""
    expected, reported = [list(row) for row in want], [list(row) for row in got]
    return kind(
        f"{what} differs: {tables.first_difference(columns, expected, reported)}\n"
        f"expected:\n{text_table([list(columns), *expected])}\n"
        f"got:\n{text_table([list(columns), *reported])}{after}",
        list(columns),
        expected,
        reported,
    )
