"""What changed against a baseline run: the daily question of an implementer's CI.

A scenario *works* when the implementation did the right thing (passed, or
passed although listed as an expected failure) and is *broken* when it did
not (failed, error, or a listed expected failure). A regression is a
scenario that worked in the baseline and is broken now; a fix the reverse.
Everything else that changed (a scenario now not applicable, new or gone)
is listed as changed, and never fails a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sbtck.reports.results import ERROR, EXPECTED_FAILURE, FAILED, PASSED, UNEXPECTED_PASS, ScenarioRecord

WORKS = frozenset({PASSED, UNEXPECTED_PASS})
BROKEN = frozenset({FAILED, ERROR, EXPECTED_FAILURE})
ABSENT = "absent"


@dataclass(frozen=True)
class Change:
    id: str
    before: str
    after: str


@dataclass
class Changes:
    regressions: list[Change] = field(default_factory=list)
    fixes: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.regressions)} regression{'s' * (len(self.regressions) != 1)}, "
            f"{len(self.fixes)} fix{'es' * (len(self.fixes) != 1)}, {len(self.changed)} other change"
            f"{'s' * (len(self.changed) != 1)}"
        )


def compare(before: list[ScenarioRecord], after: list[ScenarioRecord]) -> Changes:
    old = {r.id: r.status for r in before}
    new = {r.id: r.status for r in after}
    # in the features' order (a feature's path, then the scenario's line): [1] before [10], never as strings sort
    place = {r.id: (r.feature_path, r.line, r.id) for r in [*before, *after]}
    changes = Changes()
    for sid in sorted(old.keys() | new.keys(), key=place.__getitem__):
        was, now = old.get(sid, ABSENT), new.get(sid, ABSENT)
        if was == now:
            continue
        change = Change(sid, was, now)
        if was in WORKS and now in BROKEN:
            changes.regressions.append(change)
        elif was in BROKEN and now in WORKS:
            changes.fixes.append(change)
        else:
            changes.changed.append(change)
    return changes
