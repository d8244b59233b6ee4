"""How a step function is bound to its phrase: one place, so the vocabulary stays small and uniform."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pytest_bdd import given, then, when

from sbtck.steps.phrases import ACTION, GIVEN, Phrase
from sbtck.steps.template import PhraseParser

F = TypeVar("F", bound=Callable[..., None])


def step_for(phrase: Phrase) -> Callable[[F], F]:
    """Registers the function for its phrase, bound as Given, When or Then by the phrase's kind (pytest-bdd's own
    ``step`` binds one text to all three); an action reads the same as set-up (Given) and as the event (When)."""

    def register(func: F) -> F:
        # stacklevel 2: pytest-bdd registers the step in the module that applies @step, not in this helper
        parser = PhraseParser(phrase.template)
        if phrase.kind == ACTION:
            given(parser, stacklevel=2)(when(parser, stacklevel=2)(func))
        elif phrase.kind == GIVEN:
            given(parser, stacklevel=2)(func)
        else:
            then(parser, stacklevel=2)(func)
        return func

    return register
