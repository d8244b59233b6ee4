"""How steps are registered: one place, so the vocabulary stays small and uniform."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pytest_bdd import given, parsers, when

F = TypeVar("F", bound=Callable[..., None])


def both(pattern: str) -> Callable[[F], F]:
    """An action reads the same as set-up (Given) and as the event under test (When)."""

    def register(func: F) -> F:
        # stacklevel 2: pytest-bdd registers the step in the module that applies @both, not in this helper
        given(parsers.re(pattern), stacklevel=2)(when(parsers.re(pattern), stacklevel=2)(func))
        return func

    return register
