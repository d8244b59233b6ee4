"""A command is declared once, in sbtck/contract.py, and everything else is derived from it or stands beside its
step (issue 35): the reference engine runs it with the Broker method of its kind, the randomized stage writes it
only for an implementation that declares what it ``needs``, and a reproducer says it with the step registered to
say it. Each test fails for a command that misses one of these pieces."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from sbtck import contract
from sbtck.engine import Broker
from sbtck.iut.protocol_doc import EXAMPLES
from sbtck.steps.template import PhraseParser
from sbtck.steps.vocabulary import sayings
from sbtck.workloads import generate, reproduce

START_MS = 1_767_225_600_000
# what no step says: the topology a reproducer writes as its doc string, and the views its Then steps read
SAID_OTHERWISE = {contract.Start.kind, contract.QueryView.kind}


@pytest.mark.parametrize("kind", sorted(contract.COMMANDS))
def test_the_reference_engine_runs_every_command_by_the_method_of_its_kind(kind: str) -> None:
    if kind == contract.Start.kind:
        return  # a start makes the broker (iut/reference.py)
    method = getattr(Broker, kind, None)
    assert callable(method), f"the engine's Broker has no method {kind!r} for the command {kind!r}"
    taken = [p for p in inspect.signature(method).parameters.values() if p.name not in ("self", "at_ms")]
    fields = {f.name for f in dataclasses.fields(contract.COMMANDS[kind])} - {"at_ms"}
    names = {p.name for p in taken}
    assert fields <= names, f"Broker.{kind} takes {sorted(names)}; the command has {sorted(fields)}"
    # anything more it takes is its own (RECEIVE's flag for GET CONVERSATION GROUP), with a default
    assert all(p.default is not p.empty for p in taken if p.name not in fields)


@pytest.mark.parametrize("kind", sorted(contract.COMMANDS))
def test_what_a_command_needs_is_a_capability_and_the_stage_writes_it_only_then(kind: str) -> None:
    needs = contract.COMMANDS[kind].needs
    assert needs is None or needs in contract.CAPABILITIES
    assert generate.NEEDS.get(kind) == needs


@pytest.mark.parametrize("kind", sorted(set(contract.COMMANDS) - SAID_OTHERWISE))
def test_a_step_says_every_command_and_its_words_read_back_as_that_step(kind: str) -> None:
    assert sayings().get(kind), f"no step says a {kind!r} command: give its step_for a says="
    examples = [e for e in EXAMPLES if e.kind == kind]
    if kind == contract.Send.kind:  # said by two steps, one for each end
        examples += [contract.Send(START_MS, "D1", from_target=not examples[0].from_target)]  # type: ignore[attr-defined]
    assert examples, f"docs/protocol.md has no example of {kind!r} (sbtck/iut/protocol_doc.py EXAMPLES)"
    for example in examples:
        op = example.to_json()
        text = reproduce.step(op, START_MS)
        assert text is not None
        readers = [phrase for phrase, _ in sayings()[kind] if PhraseParser(phrase.template).is_matching(text)]
        assert readers, f"{text!r}, said for {op}, is read by none of the phrases that say {kind!r}"
