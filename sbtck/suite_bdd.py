"""What the suite's parts read of pytest-bdd's scenarios, and what they keep on a scenario's item.

The parts (``suite_selecting``, ``suite_recording``, ``suite_writing``) name a
scenario and its examples the same way: one record per example of an outline,
named and placed as here, or the expectations, the selection and the report
would count different scenarios.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.scenario import scenario_wrapper_template_registry

from sbtck.reports import results
from sbtck.resources import features
from sbtck.steps.phrases import PHRASES, Phrase
from sbtck.steps.world import World

# the argument through which pytest-bdd parametrizes a Scenario Outline's test with each example's values
EXAMPLE_PARAM = "_pytest_bdd_example"

RECORD = pytest.StashKey[results.ScenarioRecord]()
WORLD = pytest.StashKey[World]()
STEP_AT = pytest.StashKey[tuple[str, int]]()
STEP_STARTED = pytest.StashKey[float]()
SAID = pytest.StashKey[str]()  # the kit's words for a step no definition reads, shown instead of pytest-bdd's frames
NOT_APPLICABLE_BECAUSE = pytest.StashKey[str]()


def feature_path(config: pytest.Config, filename: str) -> str:
    """The kit's features are ``features/AREA/NN_name.feature`` wherever the kit is installed (expectation
    files name them so); any other feature file is named relative to the session's rootdir."""
    path = Path(filename).resolve()
    for base, prefix in ((features().resolve(), "features/"), (config.rootpath.resolve(), "")):
        if path.is_relative_to(base):
            return prefix + path.relative_to(base).as_posix()
    return path.as_posix()


def template_of(item: pytest.Item) -> Any:
    """The pytest-bdd scenario ITEM runs, or None: an item of another kind may have no object, or one no weak
    reference can name."""
    obj = getattr(item, "obj", None)
    try:
        return scenario_wrapper_template_registry.get(obj)  # type: ignore[arg-type]
    except TypeError:  # what no weak reference can name, None among them
        return None


def tags_of(template: Any, item: pytest.Item | None = None) -> set[str]:
    """A scenario's tags and its feature's; of ITEM, an outline's example, its Examples table's too."""
    found = set(template.tags) | set(template.feature.tags) | {t for table in template.examples for t in table.tags}
    if item is None or not template.examples:
        return found
    example = identity(item, template)[2] or {}
    tables = [table for table in template.examples for _ in table.as_contexts()]
    index = int(example.get("index", 1)) - 1
    return set(template.tags) | set(template.feature.tags) | set(tables[index].tags if index < len(tables) else ())


def identities(template: Any) -> list[tuple[str, int, dict[str, Any] | None]]:
    """The name, line and example of each record TEMPLATE makes: one of a Scenario, one per example of a Scenario
    Outline (across its Examples tables, in pytest-bdd's order of parametrization), at the example's row."""
    examples = [(table, values) for table in template.examples for values in table.as_contexts()]
    if not examples:
        return [(template.name, template.line_number, None)]
    rows = _example_rows(template.feature.filename, tuple(table.line_number for table in template.examples))
    return [
        (
            results.example_name(template.render(values).name, index, values),
            rows[index - 1] if index <= len(rows) else template.line_number,
            {"index": index, "values": values},
        )
        for index, (_, values) in enumerate(examples, 1)
    ]


def identity(item: pytest.Item, template: Any) -> tuple[str, int, dict[str, Any] | None]:
    """The name, line and example of the record ITEM makes (pytest's index of its example picks which)."""
    found = identities(template)
    callspec = getattr(item, "callspec", None)
    index = callspec.indices.get(EXAMPLE_PARAM, 0) if callspec is not None else 0
    return found[index] if index < len(found) else found[0]


@functools.lru_cache(maxsize=256)
def _example_rows(filename: str, tables: tuple[int | None, ...]) -> list[int]:
    """The line of each example row of the Examples tables starting at TABLES (pytest-bdd keeps no row's line):
    after each table's header row, the rows up to the first line that is neither a row, blank nor a comment."""
    lines = Path(filename).read_text(encoding="utf-8").splitlines()
    rows: list[int] = []
    for start in tables:
        if start is None:
            continue
        header = False
        for number in range(start + 1, len(lines) + 1):
            text = lines[number - 1].strip()
            if text.startswith("|"):
                if header:
                    rows.append(number)
                header = True
            elif text and not text.startswith("#"):
                break
    return rows


def unknown_step(text: str, feature: str, line: int) -> str:
    """What to say of a step no definition reads: where it is, and the kit's phrases nearest to it."""
    keyword, _, words = text.partition(" ")
    near = nearest_phrases(words)
    return (
        f"no step definition reads {keyword} {words!r} ({feature}, line {line})"
        + ("; did you mean " + " or ".join(repr(p.example) for p in near) if near else "")
        + ". The kit's phrases are listed in docs/steps.md (sbtck docs steps); a step of your own needs a step "
        "definition in your conftest.py"
    )


def nearest_phrases(words: str, most: int = 3) -> list[Phrase]:
    """The kit's phrases whose example reads most like WORDS, best first."""
    examples = {phrase.example: phrase for phrase in PHRASES.values()}
    return [examples[e] for e in difflib.get_close_matches(words, list(examples), n=most, cutoff=0.6)]
