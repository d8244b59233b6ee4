"""The reference's traces of a few worlds, pinned: the engine's behaviour changes by decision, never by accident.

Work on the engine's speed must leave every hash here as it is. A change of
behaviour that is meant (a rule put right) writes the new hashes with

    python -m tests.workloads.test_trace_hashes

and its commit says why they changed.
"""

from __future__ import annotations

import json
from pathlib import Path

from sbtck.iut.reference import reference
from sbtck.workloads.generate import GENERATOR_VERSION, generate
from sbtck.workloads.trace import run

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


if __name__ == "__main__":
    PINNED.write_text(json.dumps({"generator": GENERATOR_VERSION, "hashes": trace_hashes()}, indent=1) + "\n")
    print(f"wrote {PINNED}")
