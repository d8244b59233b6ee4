"""A fault is drawn only for an implementation that takes the commands it writes: what it needs is the contract's
declaration of those commands (generate.FAULTS), never a table of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sbtck import contract
from sbtck.workloads import generate


@pytest.fixture
def struck(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[str]]]]:
    """Each fault a world strikes, with the kinds of the commands it wrote."""
    seen: list[tuple[str, list[str]]] = []
    strike = generate._Script.strike

    def recording(script: generate._Script, kind: str, address: str | None) -> None:
        written = len(script.ops)
        strike(script, kind, address)
        seen.append((kind, [op["kind"] for op in script.ops[written:]]))

    monkeypatch.setattr(generate._Script, "strike", recording)
    yield seen


def test_a_fault_writes_only_the_commands_its_needs_are_read_from(struck: list[tuple[str, list[str]]]) -> None:
    for seed in range(300):
        generate.generate(seed)
    written = {kind for kind, _ in struck}
    assert written == set(generate.FAULTS), set(generate.FAULTS) ^ written
    for kind, commands in struck:
        declared = {c.kind for c in generate.FAULTS[kind]}
        # a route answered by a dynamic routing service where it is declared
        if kind == "routes":
            declared.add(contract.AnswerRoutingRequest.kind)
        assert set(commands) <= declared, (kind, commands)
