"""Set aside, before they run, the mutants that only change a function's type annotations; then count a session.

Every module of the engine starts with ``from __future__ import annotations``, so the annotations of a
function's parameters and result, and of its local names, are never evaluated: a mutant that changes only
one of them (``str | None`` made ``str - None``) is equivalent by construction, yet it survives the whole
suite, the slowest kind of mutant to run. Such mutants are marked skipped in the session before
``cosmic-ray exec``. Annotations of a class body are left to run: a dataclass reads them (``ClassVar``),
and so might anything that resolves type hints.

    python scripts/mutation_annotations.py skip out/mutation/router.sqlite engine/router.py
    python scripts/mutation_annotations.py count out/mutation/router.sqlite

``count`` prints mutants, skipped as annotations, killed, survived and not yet run, and the score: killed
among the mutants run.
"""

from __future__ import annotations

import ast
import sqlite3
import sys
from pathlib import Path

Span = tuple[tuple[int, int], tuple[int, int]]


def annotation_spans(source: str) -> list[Span]:
    """Where the annotations of functions' parameters, results and local names are, as (row, col) pairs."""
    tree = ast.parse(source)
    if not any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    ):
        return []  # annotations are evaluated: a mutant of one may behave differently
    spans: list[Span] = []

    def add(node: ast.expr | None) -> None:
        if node is not None and node.end_lineno is not None and node.end_col_offset is not None:
            spans.append(((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)))

    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        add(function.returns)
        arguments = function.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
            if arg is not None:
                add(arg.annotation)
        for node in ast.walk(function):
            if isinstance(node, ast.AnnAssign):
                add(node.annotation)
    return spans


def _inside(start: tuple[int, int], end: tuple[int, int], spans: list[Span]) -> bool:
    return any(low <= start and end <= high for low, high in spans)


def skip(session: Path, module: Path) -> int:
    """Mark the mutants of MODULE that lie wholly in an annotation as skipped, those not run yet and those that
    survived (a session begun before the filter); how many. One the suite killed keeps its result."""
    spans = annotation_spans(module.read_text())
    with sqlite3.connect(session) as db:
        candidates = db.execute(
            "SELECT m.job_id, start_pos_row, start_pos_col, end_pos_row, end_pos_col FROM mutation_specs m "
            "LEFT JOIN work_results r ON r.job_id = m.job_id WHERE r.job_id IS NULL OR r.test_outcome = 'SURVIVED'"
        ).fetchall()
        skipped = [job for job, *pos in candidates if _inside((pos[0], pos[1]), (pos[2], pos[3]), spans)]
        db.executemany(
            "INSERT OR REPLACE INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
            "VALUES ('SKIPPED', 'in a type annotation: equivalent', NULL, NULL, ?)",
            [(job,) for job in skipped],
        )
    return len(skipped)


def count(session: Path) -> dict[str, int]:
    with sqlite3.connect(session) as db:
        total = db.execute("SELECT COUNT(*) FROM work_items").fetchone()[0]
        rows = db.execute("SELECT worker_outcome, test_outcome, COUNT(*) FROM work_results GROUP BY 1, 2").fetchall()
    got = {"mutants": total, "annotations": 0, "killed": 0, "survived": 0, "other": 0}
    for worker, test, n in rows:
        if worker == "SKIPPED":
            got["annotations"] += n
        elif test == "KILLED":
            got["killed"] += n
        elif test == "SURVIVED":
            got["survived"] += n
        else:  # a time-out or an abnormal worker: the suite did not pass, so the mutant is killed
            got["other"] += n
    got["pending"] = total - sum(got[k] for k in ("annotations", "killed", "survived", "other"))
    return got


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "skip":
        print(f"{skip(Path(sys.argv[2]), Path(sys.argv[3]))} mutants in type annotations set aside")
    elif len(sys.argv) == 3 and sys.argv[1] == "count":
        got = count(Path(sys.argv[2]))
        run = got["killed"] + got["other"] + got["survived"]
        score = f"{100 * (got['killed'] + got['other']) / run:.1f}%" if run else "-"
        print(" ".join(f"{k} {v}" for k, v in got.items()) + f" score {score}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
