from __future__ import annotations

import pytest

from sbtck.errors import TimeExpressionError
from sbtck.steps.timeexpr import evaluate

PARAMS = {"t": 60.0, "w": 5.0}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12", 12),
        ("{t}", 60),
        ("{t} - 1", 59),
        ("2 + 2 * {t}", 122),
        ("11 - {w}", 6),
        ("{t} * 2 - {w} + 0.5", 115.5),
        ("-5", -5),
    ],
)
def test_expressions(text: str, value: float) -> None:
    assert evaluate(text, PARAMS.__getitem__) == value


@pytest.mark.parametrize("text", ["", "twelve", "5 +", "{t} {w}", "* 3", "3 / 2", "-"])
def test_bad_expressions_say_how_to_write_one(text: str) -> None:
    with pytest.raises(TimeExpressionError):
        evaluate(text, PARAMS.__getitem__)
