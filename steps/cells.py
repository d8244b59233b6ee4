"""How a value shows in a feature's table: one rule for the steps that compare and the reproducers that write."""

from __future__ import annotations

from typing import Any

from sbtck.agreement import CASE_FREE, compared
from sbtck.observations import TIME
from sbtck.views import column_class

NULL = "NULL"


def cell(column: str, value: Any, start_ms: int) -> str:
    """``NULL`` for nothing, ``a, b`` for a list (``(none)`` empty), ``second N`` for a time (epoch milliseconds:
    a ``*_time`` column, SQL Server's names, or a ``*_ms`` one, the kit's own views')."""
    if value is None:
        return NULL
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    if column_class(column) == TIME:
        return f"second {(int(value) - start_ms) / 1000:g}"
    return str(compared(column, str(value)))


def allows(want: str, got: str) -> bool:
    """A cell may allow choices the documents leave open: "sql1.shop or sql1.stock"."""
    return want == got or got in want.split(" or ")


def as_compared(column: str, text: str) -> str:
    """A cell of a feature's table as ``cell`` would render what it expects (each of "a or b" alike)."""
    if column in CASE_FREE and text != NULL:  # the documents give a host name no case: compared in upper case
        return " or ".join(option.upper() for option in text.split(" or "))
    return text
