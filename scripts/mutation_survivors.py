"""Sort the survivors of a cosmic-ray session: those that change a type annotation, and the rest.

Every module of the engine starts with ``from __future__ import annotations``,
so an annotation is never evaluated and a mutant that only changes one
(``str | None`` made ``str + None``) cannot behave differently: it is
equivalent by construction. What is left is the list to read.

    python scripts/mutation_survivors.py out/mutation/routing.sqlite
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ANNOTATED = re.compile(r"^\s*(def .*|self, \w+: .*|\w+: .*|\*?\*?\w+: [^=]*,?|\) -> .*)$")


def _changed(before: str, after: str) -> tuple[int, int]:
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    return start, len(before) - end


def in_annotation(before: str, after: str) -> bool:
    """Does the mutation change only the type part of a signature, a parameter or an annotated name?"""
    if not ANNOTATED.match(before):
        return False
    start, end = _changed(before, after)
    arrow = before.find("->")
    if arrow != -1 and start > arrow:
        return True
    colon = before.find(": ")
    equals = before.find(" = ", colon) if colon != -1 else -1
    if before.lstrip().startswith(("def ", "self, ")):
        # a signature, or the parameter line of one wrapped by the formatter
        # inside the parameter list: the changed span lies after some "name: " and before the next "," or ")"
        head = before[:start]
        return bool(re.search(r"\w+: [^,()=]*$", head)) and not re.search(r"=", before[start:end])
    return colon != -1 and start > colon and (equals == -1 or end <= equals)


def main() -> None:
    session = Path(sys.argv[1])
    report = subprocess.run(
        [str(Path(sys.executable).with_name("cr-report")), "--surviving-only", "--show-diff", str(session)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    annotations, rest = 0, []
    for block in report.split("=== DIFF ===")[1:]:
        lines = block.splitlines()
        minus = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
        plus = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
        where = next((line for line in lines if line.startswith("@@")), "")
        if len(minus) == len(plus) == 1 and in_annotation(minus[0], plus[0]):
            annotations += 1
        else:
            rest.append(f"{where}\n  - {minus[0].strip() if minus else ''}\n  + {plus[0].strip() if plus else ''}")
    print(f"{session.stem}: {annotations + len(rest)} survivors, {annotations} in type annotations (equivalent)")
    print("\n".join(rest))


if __name__ == "__main__":
    main()
