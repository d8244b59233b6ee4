"""No class of the reference engine is over 250 lines: a room the size of a concern (issue 45).

A class that grows past it holds more than one concern; split it along them,
as the Router was (sbtck/engine/router.py and its rooms), rather than raise
the limit. A class's lines run from its ``class`` line (or first decorator)
to its last, blank lines and comments inside it included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import sbtck

ENGINE = Path(sbtck.__file__).resolve().parent / "engine"
LIMIT = 250
# classes over the limit, each with why it is not split yet; empty once every one is
EXCEPTIONS: dict[str, str] = {}


def class_sizes() -> dict[str, int]:
    return {name: n for path in sorted(ENGINE.glob("*.py")) for name, n in sizes_in(path, f"sbtck/engine/{path.name}")}


def sizes_in(path: Path, where: str) -> Iterator[tuple[str, int]]:
    """Each class of the module at PATH, named WHERE:CLASS, with its lines (test_class_size_outside_engine.py
    counts the rest of the package by the same measure)."""
    for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(cls, ast.ClassDef):
            first = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
            yield f"{where}:{cls.name}", int(cls.end_lineno or cls.lineno) - first + 1


def test_no_class_of_the_engine_is_over_the_limit() -> None:
    over = {name: n for name, n in class_sizes().items() if n > LIMIT and name not in EXCEPTIONS}
    assert not over, f"classes over {LIMIT} lines (split them along their concerns): {over}"


def test_each_exception_is_still_over_the_limit() -> None:
    sizes = class_sizes()
    done = [name for name in EXCEPTIONS if sizes.get(name, 0) <= LIMIT]
    assert not done, f"no longer over {LIMIT} lines (or gone): take them out of EXCEPTIONS: {done}"
