"""scripts/mutation_annotations.py sets aside only mutants that cannot change behaviour."""

from __future__ import annotations

import importlib.util
import sqlite3
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


def test_skip_sets_aside_pending_and_surviving_annotation_mutants_and_keeps_a_kill(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(SOURCE)
    session = tmp_path / "s.sqlite"
    with sqlite3.connect(session) as db:
        db.execute("CREATE TABLE work_items (job_id VARCHAR PRIMARY KEY)")
        db.execute(
            "CREATE TABLE mutation_specs (job_id VARCHAR PRIMARY KEY, start_pos_row INTEGER, start_pos_col INTEGER, "
            "end_pos_row INTEGER, end_pos_col INTEGER)"
        )
        db.execute(
            "CREATE TABLE work_results (worker_outcome VARCHAR, output TEXT, test_outcome VARCHAR, diff TEXT, "
            "job_id VARCHAR PRIMARY KEY)"
        )
        jobs = {  # job: (where, result so far)
            "pending-annotation": (_at("str | None", 11), None),
            "survived-annotation": (_at("list[str]", 11), "SURVIVED"),
            "killed-annotation": (_at("dict[str, int]", 12), "KILLED"),
            "pending-code": (_at("len(found) + 1", 13), None),
            "survived-code": (_at("len(found) + 1", 13), "SURVIVED"),
        }
        for job, ((row, col), result) in jobs.items():
            db.execute("INSERT INTO work_items VALUES (?)", (job,))
            db.execute("INSERT INTO mutation_specs VALUES (?, ?, ?, ?, ?)", (job, row, col, row, col + 3))
            if result:
                db.execute("INSERT INTO work_results VALUES ('NORMAL', '', ?, '', ?)", (result, job))
    assert tool.skip(session, module) == 2
    assert tool.count(session) == {
        "mutants": 5,
        "annotations": 2,
        "killed": 1,
        "survived": 1,
        "other": 0,
        "pending": 1,
    }
