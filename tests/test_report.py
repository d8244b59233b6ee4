"""The HTML report: every catalogue rule has a row, and nothing an implementation says can run."""

from __future__ import annotations

import re
from pathlib import Path

from fixtures import results as r
from reports import html
from sbtck import catalogue

EVIL = "<script>alert(1)</script>"


def _record(status: str, **extra: object) -> r.ScenarioRecord:
    return r.ScenarioRecord(
        id="features/activation/01_x.feature::[1] a",
        feature_path="features/activation/01_x.feature",
        feature_name="Activation 01",
        name="[1] a",
        line=3,
        tags=["ACT-02"],
        steps=[r.StepRecord("Given", 'the topology "activation"', 4, "passed")],
        status=status,
        **extra,  # type: ignore[arg-type]
    )


def test_every_rule_has_a_row_and_uncovered_rules_say_so(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    r.write(path, {"implementation": {"name": "x"}}, [_record("passed")])
    page = html.build([path], tmp_path / "index.html").read_text()
    rows = re.findall(r'<tr id="rule-([A-Z]+-[0-9A-Z]+)"', page)
    assert rows == list(catalogue.load().rules)
    assert page.count("no scenario") == len(rows) - 1


def test_implementation_strings_are_escaped(tmp_path: Path) -> None:
    record = _record(
        "failed",
        failure={"step": EVIL, "line": 4, "kind": "failed", "message": f"expected <b>{EVIL}</b>"},
        events=[{"at_ms": 0, "second": 0, "kind": EVIL, "queue": EVIL}],
    )
    path = tmp_path / "results.json"
    r.write(path, {"implementation": {"name": EVIL, "version": '"><img src=x onerror=alert(1)>'}}, [record])
    page = html.build([path], tmp_path / "index.html").read_text()
    assert EVIL not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the report's own filter script, and no other
