"""Record the survivors of a mutation session in the repository, where each must have its reason (issue 44 item 4).

A surviving mutant is work: a scenario that kills it, written from the documents, or an entry in
tests/engine/mutation/survivors.yaml saying why no scenario can (equivalent, another reading, unreached, the
stage's: the file says what each means). This writes a session's survivors, those that change more than a type
annotation (mutation_survivors.py sets those aside), as tests/engine/mutation/MODULE.json;
tests/engine/test_mutation_survivors.py fails while one has no reason, or a reason names none.

    bash scripts/mutation.sh engine/receiving.py                    (the session)
    python scripts/mutation_recheck.py out/mutation/receiving.sqlite  (after new scenarios: marks what they kill)
    python scripts/mutation_record.py out/mutation/receiving.sqlite engine/receiving.py
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from mutation_survivors import in_annotation

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "engine" / "mutation"


def survivors(session: Path) -> list[dict[str, Any]]:
    """Each surviving mutant outside annotations: its function, the lines before and after (stripped), its line."""
    with sqlite3.connect(session) as db:
        rows = db.execute(
            "select s.definition_name, s.start_pos_row, r.diff from work_results r"
            " join mutation_specs s on s.job_id = r.job_id where r.test_outcome = 'SURVIVED'"
            " order by s.start_pos_row, r.diff"
        ).fetchall()
    found = []
    for function, row, diff in rows:
        lines = diff.splitlines()
        minus = [x[1:] for x in lines if x.startswith("-") and not x.startswith("---") and x[1:].strip()]
        plus = [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++") and x[1:].strip()]
        if len(minus) == len(plus) == 1 and in_annotation(minus[0], plus[0]):
            continue
        before, after = " / ".join(x.strip() for x in minus), " / ".join(x.strip() for x in plus)
        found.append({"function": function, "line": row, "before": before, "after": after})
    return found


def record(session: Path, module: str) -> Path:
    with sqlite3.connect(session) as db:
        outcomes = dict(db.execute("select test_outcome, count(*) from work_results group by test_outcome").fetchall())
        mutants = db.execute("select count(*) from mutation_specs").fetchone()[0]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    left = survivors(session)
    data = {
        "module": module,
        "commit": commit.stdout.strip(),
        "mutants": mutants,
        "killed": outcomes.get("KILLED", 0),
        # annotation mutants are set aside before the run (mutation_annotations.py) or after it (mutation_survivors.py)
        "set_aside": mutants - outcomes.get("KILLED", 0) - len(left),
        "survived": len(left),
        "survivors": left,
    }
    out = FOLDER / f"{Path(module).stem}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(f"wrote {record(Path(argv[0]), argv[1])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
