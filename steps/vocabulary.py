"""How a step function is bound to its phrase, and how a command is said back in it: one place, so the vocabulary
stays small and uniform.

A step that runs a contract command also says how a command of that kind reads in its phrase (``says``): the
workload stage's reproducers write the commands of a shrunk world with it (sbtck/workloads/reproduce.py). The step
and its inverse stand side by side, so that adding a command is one declaration in the contract, one engine
method and one step.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from pytest_bdd import given, then, when

from sbtck.contract import Command
from sbtck.steps.phrases import ACTION, GIVEN, Phrase
from sbtck.steps.template import PhraseParser

F = TypeVar("F", bound=Callable[..., None])
# a command's JSON and the scenario's start (epoch ms) -> the phrase's slot values, or None where the phrase does
# not say that command (a reply is said by REPLY, not by SEND)
Saying = Callable[[dict[str, Any], int], dict[str, Any] | None]
# the modules of the kit's step definitions
STEP_MODULES = (
    "sbtck.steps.setup_steps",
    "sbtck.steps.session_steps",
    "sbtck.steps.observe_steps",
    "sbtck.steps.routing_steps",
    "sbtck.steps.periodic_steps",
    "sbtck.workloads.steps",  # the reproducers' Then steps
)
# by command kind: the phrases that say it, each with how, in the order their steps were registered
SAYINGS: dict[str, list[tuple[Phrase, Saying]]] = {}


def step_for(
    phrase: Phrase, says: tuple[type[Command], Saying] | list[tuple[type[Command], Saying]] | None = None
) -> Callable[[F], F]:
    """Registers the function for its phrase, bound as Given, When or Then by the phrase's kind (pytest-bdd's own
    ``step`` binds one text to all three); an action reads the same as set-up (Given) and as the event (When).
    ``says``: the command the step runs and how a command of that kind reads in the phrase (a list, for a step
    that runs one of several)."""

    def register(func: F) -> F:
        # stacklevel 2: pytest-bdd registers the step in the module that applies @step, not in this helper
        parser = PhraseParser(phrase.template)
        if phrase.kind == ACTION:
            given(parser, stacklevel=2)(when(parser, stacklevel=2)(func))
        elif phrase.kind == GIVEN:
            given(parser, stacklevel=2)(func)
        else:
            then(parser, stacklevel=2)(func)
        for command, saying in says if isinstance(says, list) else [] if says is None else [says]:
            SAYINGS.setdefault(command.kind, []).append((phrase, saying))
        return func

    return register


def sayings() -> dict[str, list[tuple[Phrase, Saying]]]:
    """Every command kind a step says, once the kit's step modules are imported (outside pytest too)."""
    for module in STEP_MODULES:
        importlib.import_module(module)
    return SAYINGS


def seconds(ms: int | None) -> float | None:
    """A time in milliseconds, as a phrase writes it."""
    return None if ms is None else ms / 1000
