"""Worlds are pure functions of their seed; the reference engine keeps every invariant in them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine import Broker
from iut.reference import ReferenceImplementation, reference
from tests import variants
from tests.test_engine_properties import _Duplicates, _IgnoresLocks
from workloads.generate import generate
from workloads.invariants import check
from workloads.trace import run

SEEDS = range(150)


def test_the_same_seed_gives_the_same_world_and_the_same_trace() -> None:
    for seed in SEEDS:
        first, second = generate(seed), generate(seed)
        assert first == second
        assert run(first, reference()).digest() == run(second, reference()).digest()
    assert generate(1) != generate(2)


def test_worlds_have_conversations_and_the_reference_accepts_their_commands() -> None:
    refused = 0
    for seed in SEEDS:
        world = generate(seed)
        assert world.conversations >= 1
        trace = run(world, reference())
        refused += sum(1 for step in trace.steps if step["error"])
        assert not [s for s in trace.steps if s["error"] and s["kind"] in ("start", "begin_dialog", "send")]
    assert refused < len(SEEDS) * 3


def test_the_reference_engine_keeps_every_invariant() -> None:
    for seed in SEEDS:
        world = generate(seed)
        assert check(world, run(world, reference())) == [], seed


def _with(**parts: object) -> Callable[[], ReferenceImplementation]:
    broker = type("WrongBroker", (Broker,), parts)
    return lambda: ReferenceImplementation(broker_class=broker, name="wrong")


@pytest.mark.parametrize(
    ("factory", "rule"),
    [
        (variants.ignores_max_queue_readers, "ACT-10"),
        (_with(receiving_class=_IgnoresLocks), "ACT-09"),
        (_with(receiving_class=_Duplicates), "INV-messages"),
    ],
    ids=["ignores_max_queue_readers", "ignores_group_locks", "duplicates_on_receive"],
)
def test_a_wrong_engine_breaks_an_invariant_in_some_world(
    factory: Callable[[], ReferenceImplementation], rule: str
) -> None:
    broken = {v.rule for seed in range(300) for v in check(generate(seed), run(generate(seed), factory()))}
    assert rule in broken, f"no world showed {rule}; found {broken}"
