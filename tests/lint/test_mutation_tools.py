"""scripts/mutation_annotations.py sets aside only mutants that cannot change behaviour."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mutation_annotations", ROOT / "scripts" / "mutation_annotations.py")
assert spec is not None and spec.loader is not None
tool = importlib.util.module_from_spec(spec)
sys.modules["mutation_annotations"] = tool
spec.loader.exec_module(tool)

SOURCE = """from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Row:
    kept: int | None = None


def pick(name: str | None, *rest: int, **more: bool) -> list[str]:
    found: dict[str, int] = {}
    return [name or "x", str(len(found) + 1)]
"""


def _at(text: str, line: int) -> tuple[int, int]:
    return line, SOURCE.splitlines()[line - 1].index(text)


def test_a_functions_annotations_are_set_aside_and_its_code_and_class_bodies_are_not() -> None:
    spans = tool.annotation_spans(SOURCE)
    inside = tool._inside

    def covered(text: str, line: int) -> bool:
        row, col = _at(text, line)
        return bool(inside((row, col), (row, col + len(text)), spans))

    assert covered("str | None", 11) and covered("int", 11) and covered("bool", 11) and covered("list[str]", 11)
    assert covered("dict[str, int]", 12)  # a local name's annotation is never evaluated either
    assert not covered("int | None", 8)  # a dataclass reads its fields' annotations
    assert not covered("len(found) + 1", 13) and not covered("None", 8)


def test_a_module_that_evaluates_its_annotations_sets_nothing_aside() -> None:
    assert tool.annotation_spans(SOURCE.replace("from __future__ import annotations\n", "")) == []
