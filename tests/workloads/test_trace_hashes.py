"""The reference's traces of a few worlds, pinned: the engine's behaviour changes by decision, never by accident.

Work on the engine's speed must leave every hash here as it is. A change of
behaviour that is meant (a rule put right) writes the new hashes with

    python -m tests.workloads.test_trace_hashes

and its commit says why they changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sbtck.engine import Broker
from sbtck.engine.choosing import Addresses, FirstChooser
from sbtck.engine.routing_attempt import Routing
from sbtck.iut.reference import ReferenceImplementation, reference
from sbtck.workloads.generate import GENERATOR_VERSION, generate
from sbtck.workloads.trace import run
from tests.variants.rooms import router_with

PINNED = Path(__file__).with_name("trace_hashes.json")
# capabilities -> seeds; "" draws within every capability
WORLDS: dict[str, range] = {
    "": range(10),
    "activation,external_activation": range(4),
    "routing": range(4),
    "periodic_tasks": range(3),
}
# and a longer world, whose delayed messages are matched again for many minutes
LONG_CONVERSATIONS, LONG_SEEDS = 60, range(2)


def trace_hashes() -> dict[str, str]:
    hashes = {}
    for capabilities, seeds in WORLDS.items():
        for seed in seeds:
            world = generate(seed, capabilities=capabilities.split(",") if capabilities else None)
            hashes[f"{capabilities or 'all'}:{seed}"] = run(world, reference()).digest()
    for seed in LONG_SEEDS:
        hashes[f"long:{seed}"] = run(generate(seed, LONG_CONVERSATIONS), reference()).digest()
    return hashes


def test_the_reference_gives_the_pinned_traces() -> None:
    pinned = json.loads(PINNED.read_text())
    assert pinned["generator"] == GENERATOR_VERSION, (
        f"the hashes were pinned for generator version {pinned['generator']}, this is version "
        f"{GENERATOR_VERSION}: write them again with python -m tests.workloads.test_trace_hashes"
    )
    got = trace_hashes()
    changed = sorted(world for world, digest in got.items() if pinned["hashes"].get(world) != digest)
    assert not changed, (
        f"the reference's traces of {', '.join(changed)} changed. If the engine's behaviour was meant to change, "
        "write them again with python -m tests.workloads.test_trace_hashes and say why in the commit"
    )


class _Forgets(dict):  # type: ignore[type-arg]
    """A memo that keeps nothing."""

    def __setitem__(self, key: object, value: object) -> None:
        pass


class _MatchesEveryTime(Routing):
    """Routes every message from scratch: what the router would do without the decisions it keeps."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.memo.decided = _Forgets()
        self.memo.unroutable = _Forgets()


class _TakesTurns(FirstChooser):
    """Picks the next option each time it is asked: a decision it took part in cannot be kept."""

    def __init__(self) -> None:
        self.asked = 0

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        self.asked += 1
        return sorted(options)[self.asked % len(options)]


@pytest.mark.parametrize("chooser", [FirstChooser, _TakesTurns])
def test_the_decisions_the_router_keeps_change_no_trace(chooser: type[FirstChooser]) -> None:
    """The router's memo (sbtck/engine/routing_memo.py) is a cache: with neither, every world gives the same trace.

    The worlds create, alter and drop routes, give them lifetimes, answer routing requests and fail over
    mirrors, so each way a kept decision stops holding is met; the 60-conversation worlds route for minutes.
    """
    fresh = type("MatchesEveryTime", (Broker,), {"router_class": router_with(_MatchesEveryTime)})
    worlds = [generate(seed) for seed in range(40)]
    worlds += [generate(seed, capabilities=["routing"]) for seed in range(20)]
    worlds += [generate(seed, LONG_CONVERSATIONS) for seed in LONG_SEEDS]
    differ = [
        world.seed
        for world in worlds
        if run(world, ReferenceImplementation(chooser=chooser())).digest()
        != run(world, ReferenceImplementation(fresh, chooser=chooser())).digest()
    ]
    assert not differ, f"worlds {differ} route otherwise when the router matches every message again"


if __name__ == "__main__":
    PINNED.write_text(json.dumps({"generator": GENERATOR_VERSION, "hashes": trace_hashes()}, indent=1) + "\n")
    print(f"wrote {PINNED}")
