"""A file of the kit is named one way in docs and messages: ``sbtck/engine/router.py``, the path it has in the
checkout (through the link) and in an installed wheel alike, never ``engine/router.py``, which only the checkout
has. Two kinds of text keep the checkout's path: node ids relative to the kit (``steps/test_features.py::...``)
and the mutation-testing record of docs/maintaining.md, whose script takes checkout paths."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

KIT_FOLDERS = ("engine", "iut", "steps", "fixtures", "reports", "workloads")
BARE = re.compile(r"(?<![\w/.\-])(?:" + "|".join(KIT_FOLDERS) + r")/[\w/]+\.(?:py|yaml|ini)(?!::)")


def _texts() -> list[Path]:
    code = [p for folder in ("sbtck", *KIT_FOLDERS, "bench") for p in (ROOT / folder).rglob("*.py")]
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *code]


def test_every_kit_file_is_named_by_its_path_in_the_package() -> None:
    found = []
    for path in _texts():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if path.name == "maintaining.md" and ("mutation" in line or line.startswith("| `engine/")):
                continue
            if "engine/events.py`: 0 jobs" in line:  # a mutation.sh command
                continue
            found += [f"{path.relative_to(ROOT)}:{number}: {m.group()}" for m in BARE.finditer(line)]
    assert found == [], "write sbtck/FOLDER/FILE:\n" + "\n".join(found)
