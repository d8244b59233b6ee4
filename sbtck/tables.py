"""Two tables of rows, the expected and the reported, aligned by a diff (difflib's SequenceMatcher).

One extra row in what an implementation reported is one row marked, not every row after it: rows are paired
where they are equal, and only the stretches between equal rows are paired by position. The failing step words
its one-line cause from this alignment and the page draws it, so both name the same first difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

Row = Sequence[str]


@dataclass(frozen=True)
class Pair:
    """One line of the aligned tables: an expected row and a reported one (numbered from 1), either absent."""

    want: Row | None
    got: Row | None
    want_number: int | None
    got_number: int | None

    @property
    def missing(self) -> bool:
        """An expected row the implementation did not report."""
        return self.got is None

    @property
    def inserted(self) -> bool:
        """A reported row the table did not expect."""
        return self.want is None

    @property
    def differs(self) -> bool:
        return self.want is None or self.got is None or list(self.want) != list(self.got)

    def differing(self) -> list[int]:
        """The columns whose cells differ: all of them for a missing or an inserted row."""
        if self.want is None or self.got is None:
            return list(range(len(self.want if self.want is not None else self.got or [])))
        return [i for i, (w, g) in enumerate(zip(self.want, self.got, strict=False)) if w != g]


def align(expected: Sequence[Row], got: Sequence[Row]) -> list[Pair]:
    """EXPECTED and GOT as one list of pairs; within a stretch that differs, rows pair by position and what is
    left over is missing (expected, not reported) or inserted (reported, not expected)."""
    matcher = SequenceMatcher(None, [tuple(r) for r in expected], [tuple(r) for r in got], autojunk=False)
    pairs: list[Pair] = []
    for _, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            want = expected[i] if i < i2 else None
            have = got[j] if j < j2 else None
            pairs.append(Pair(want, have, i + 1 if want is not None else None, j + 1 if have is not None else None))
    return pairs


def _row(columns: Sequence[str], row: Row) -> str:
    return ", ".join(f"{c} {v}" for c, v in zip(columns, row, strict=False))


def first_difference(columns: Sequence[str], expected: Sequence[Row], got: Sequence[Row]) -> str:
    """The first difference in one phrase: the row and the cell, or the row missing or not expected."""
    for pair in align(expected, got):
        if not pair.differs:
            continue
        if pair.want is not None and pair.got is not None:
            cells = pair.differing()
            column = cells[0]
            more = f" (and {len(cells) - 1} more cells)" if len(cells) > 1 else ""
            return (
                f"row {pair.want_number}, {columns[column]}: expected {pair.want[column]}, got {pair.got[column]}{more}"
            )
        if pair.want is not None:
            return f"expected row {pair.want_number} is missing ({_row(columns, pair.want)})"
        assert pair.got is not None
        return f"reported row {pair.got_number} was not expected ({_row(columns, pair.got)})"
    return "the same rows"
