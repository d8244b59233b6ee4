"""Each step phrase is written once (sbtck/steps/phrases.py): the features use exactly those, the docs list them all."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from gherkin.parser import Parser

from sbtck.errors import TemplateError
from sbtck.steps.phrases import PHRASES
from sbtck.steps.phrases_doc import markdown
from sbtck.steps.template import Template
from sbtck.workloads.generate import generate
from sbtck.workloads.reproduce import feature
from tests.helpers import ROOT

FEATURES = sorted((ROOT / "features").rglob("*.feature"))


def feature_steps(path: Path | str) -> list[tuple[str, int]]:
    doc: dict[str, Any] = dict(Parser().parse(path.read_text() if isinstance(path, Path) else path))
    found = []
    for child in doc["feature"]["children"]:
        for block in (child.get("background"), child.get("scenario")):
            for item in (block or {}).get("steps", []):
                found.append((item["text"], item["location"]["line"]))
    return found


def test_every_step_of_the_features_is_exactly_one_phrase() -> None:
    problems = []
    for path in FEATURES:
        for text, line in feature_steps(path):
            matching = [name for name, phrase in PHRASES.items() if phrase.template.match(text) is not None]
            if len(matching) != 1:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {text!r} is {matching or 'no phrase'}")
    assert problems == []


def reproducers() -> list[str]:
    """Reproducers as the workload stage writes them, for worlds of every kind the generator makes."""
    return [feature(generate(seed), ["ACT-10"], "an implementation", "a test") for seed in range(60)]


def test_every_step_of_a_reproducer_is_exactly_one_phrase() -> None:
    for text in reproducers():
        for step, line in feature_steps(text):
            matching = [name for name, phrase in PHRASES.items() if phrase.template.match(step) is not None]
            assert len(matching) == 1, f"line {line}: {step!r} is {matching or 'no phrase'}\n{text}"


def test_every_phrase_is_used() -> None:
    used: Counter[str] = Counter()
    texts = [text for path in FEATURES for text, _ in feature_steps(path)]
    texts += [text for reproducer in reproducers() for text, _ in feature_steps(reproducer)]
    for text in texts:
        used.update(name for name, phrase in PHRASES.items() if phrase.template.match(text) is not None)
    assert sorted(set(PHRASES) - set(used)) == []


def test_every_example_is_its_phrase() -> None:
    for name, phrase in PHRASES.items():
        assert phrase.template.match(phrase.example) is not None, name


def test_docs_steps_md_is_generated_from_the_phrases() -> None:
    assert (ROOT / "docs" / "steps.md").read_text() == markdown(), "regenerate: python -m sbtck.steps.phrases_doc"
    for phrase in PHRASES.values():
        assert phrase.example.replace("|", "\\|") in markdown()


# ---------------------------------------------------------------- the notation


def test_a_phrase_matches_and_says_its_slots() -> None:
    receive = Template(
        'session "{session}" receives [top {top:int} ]from queue "{queue}"[ waiting up to {wait:number} s]'
    )
    assert receive.match('session "S1" receives from queue "Q"') == {
        "session": "S1",
        "top": None,
        "queue": "Q",
        "wait": None,
    }
    assert receive.match('session "S1" receives top 2 from queue "Q" waiting up to 1.5 s') == {
        "session": "S1",
        "top": "2",
        "queue": "Q",
        "wait": "1.5",
    }
    assert receive.text(session="S1", queue="Q", top=2) == 'session "S1" receives top 2 from queue "Q"'
    assert receive.text(session="S1", queue="Q", wait=1.5) == 'session "S1" receives from queue "Q" waiting up to 1.5 s'
    assert receive.match('session "S1" receives top two from queue "Q"') is None


def test_alternatives_pick_the_first_whose_slots_are_given() -> None:
    fail = Template('<{count:1} handler of "{i}" fails|{count:int} handlers of "{i}" fail>')
    assert fail.text(count=1, i="sql1") == 'handler of "sql1" fails'.join(("1 ", ""))
    assert fail.text(count=3, i="sql1") == '3 handlers of "sql1" fail'
    assert fail.match('3 handlers of "sql1" fail') == {"count": "3", "i": "sql1"}
    send = Template('<a message is|{count:int} messages are> sent on dialog "{dialog}"')
    assert send.text(dialog="D1") == 'a message is sent on dialog "D1"'
    assert send.text(dialog="D1", count=4) == '4 messages are sent on dialog "D1"'
    assert send.match('a message is sent on dialog "D1"') == {"count": None, "dialog": "D1"}


def test_literal_text_is_matched_literally() -> None:
    # a dot or parenthesis of the phrase is not a regular-expression operator
    view = Template('sys.dm_broker_queue_monitors shows for queue "{queue}":')
    assert view.match('sysXdm_broker_queue_monitors shows for queue "Q":') is None
    alter = Template('ALTER QUEUE "{queue}" WITH ACTIVATION ({options:paren})')
    assert alter.match('ALTER QUEUE "Q" WITH ACTIVATION (STATUS = ON)') == {"queue": "Q", "options": "STATUS = ON"}


@pytest.mark.parametrize(
    ("source", "values", "message"),
    [
        ("a [b", None, "']' missing"),
        ("a <b|c", None, "'>' missing"),
        ("a ] b", None, "without its opening"),
        ("{x:nonsense}", None, "no kind 'nonsense'"),
        ('{state:on|off} "{x}"', {"state": "maybe", "x": "y"}, "cannot say"),
        ("{x:int}", {"y": 1}, "has no slot y"),
        ("{x:word}", {"x": "two words"}, "reads back otherwise"),
    ],
)
def test_a_phrase_or_values_it_cannot_say_are_refused(
    source: str, values: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        Template(source).text(**(values or {}))
