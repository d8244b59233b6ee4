"""Run the Gherkin suite of this tree against the survivors of an earlier cosmic-ray session.

A whole module's session takes hours; after scenarios are added for its
survivors, this tells which of them the suite now kills without running the
killed mutants again, and marks those it kills in the session (for
mutation_record.py). Each survivor's diff (annotation-only ones set aside,
as in mutation_survivors.py) is applied with ``patch`` to a copy of the tree
and the suite run on it, as scripts/mutation.sh runs it; a diff whose lines
no longer match the module is reported as not applied, and a run that hangs
past the time limit counts as killed, as cosmic-ray counts it.

    python scripts/mutation_recheck.py out/mutation/router.sqlite
    python scripts/mutation_recheck.py out/mutation/transmitter.sqlite "for w in retried" "or self._failed"
        re-runs only the survivors whose diff contains one of the texts (each run of the suite takes seconds,
        and a module's survivors hundreds of them)
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutation_survivors import in_annotation

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 120


def _survivors(session: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(session) as db:
        rows = db.execute("select job_id, diff from work_results where test_outcome = 'SURVIVED'").fetchall()
    kept = []
    for job, diff in rows:
        minus = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
        plus = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
        if not (len(minus) == len(plus) == 1 and in_annotation(minus[0], plus[0])):
            kept.append((job, diff.split("--- mutation diff ---", 1)[-1].strip("\n") + "\n"))
    return kept


def _suite_fails(tree: Path) -> bool:
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "steps"]
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        run = subprocess.run(command, cwd=tree, env=env, capture_output=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return True
    return run.returncode != 0


def main() -> None:
    session = Path(sys.argv[1])
    only = sys.argv[2:]
    diffs = [(job, diff) for job, diff in _survivors(session) if not only or any(text in diff for text in only)]
    killed, survived, unapplied = 0, [], 0
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".venv", ".git", "out", "__pycache__"), symlinks=True)
        for n, (job, diff) in enumerate(diffs, 1):
            target = tree / diff.splitlines()[0].removeprefix("--- a/")
            original = target.read_text()
            patch = subprocess.run(["patch", "-p1", "-s", "-F0"], cwd=tree, input=diff, text=True, capture_output=True)
            if patch.returncode != 0:
                unapplied += 1
                target.write_text(original)
                continue
            try:
                if _suite_fails(tree):
                    killed += 1
                    # the session says so too: mutation_record.py records what is left
                    with sqlite3.connect(session) as db:
                        db.execute("update work_results set test_outcome = 'KILLED' where job_id = ?", (job,))
                else:
                    survived.append(diff)
            finally:
                target.write_text(original)
            print(f"{n}/{len(diffs)}: {killed} killed, {len(survived)} survive", file=sys.stderr, flush=True)
    print(
        f"{session.stem}: {len(diffs)} survivors outside annotations re-run: {killed} now killed, "
        f"{len(survived)} survive, {unapplied} no longer apply"
    )
    for diff in survived:
        lines = diff.splitlines()
        where = next((line for line in lines if line.startswith("@@")), "")
        change = [line for line in lines[2:] if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        print(where, *("  " + line.strip() for line in change), sep="\n")


if __name__ == "__main__":
    main()
