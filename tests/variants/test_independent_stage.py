"""The randomized stage on the brokers written outside the team: its verdict on each may only get better.

The worlds each outside broker still fails or leaves undecided are listed beside this test
(independent_stage.json), as web-platform-tests keeps expectations beside its tests; a world listed there must be
one the documents make the broker wrong in. Those listed now are node-activation-periodic's with its decision
trace, each at the rollback of a transaction whose RECEIVE returned nothing, which it does not take for a check
("a transaction that contains a RECEIVE statement rolls back": test_independent.py's WRONG_AS_WRITTEN). A world
failing that is not listed fails this test: the stage rejects more than it did. A listed world that passes is
reported, so that the list only shrinks; write it again with

    python -m tests.variants.test_independent_stage

after a change that means it (a new generator version draws other worlds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from sbtck.iut.loader import factory_for
from sbtck.reports.results import ERROR, FAILED, PASSED
from sbtck.workloads.generate import GENERATOR_VERSION
from sbtck.workloads.stage import UNDECIDED, Checker
from tests.variants.test_independent import ACTIVATION_PERIODIC, ROUTING, _present

EXPECTED = Path(__file__).with_name("independent_stage.json")
WORLDS = 300
# each outside broker as the stage should meet it: within the capabilities its README gives for the stage
CONFIGURATIONS: dict[str, tuple[Path, str, tuple[str, ...] | None]] = {
    "activation, black box": (
        ACTIVATION_PERIODIC,
        "--capabilities=activation,external_activation --decision-trace=no",
        None,
    ),
    "activation, decision trace": (ACTIVATION_PERIODIC, "--capabilities=activation,external_activation", None),
    # every capability it declares, in the area its routing is written for (its README: "only as far as the
    # periodic scenarios need")
    "periodic, black box": (ACTIVATION_PERIODIC, "--decision-trace=no", ("periodic_tasks",)),
    "periodic, decision trace": (ACTIVATION_PERIODIC, "", ("periodic_tasks",)),
    "routing, black box": (ROUTING, "--no-trace", None),
    "routing, decision trace": (ROUTING, "", None),
}


def verdicts(name: str, worlds: int = WORLDS) -> dict[str, list[int]]:
    """The seeds of the first WORLDS worlds the stage did not pass, by outcome."""
    folder, switches, areas = CONFIGURATIONS[name]
    command = f"cmd:node {folder / 'broker.js'} {switches}".strip()
    checker = Checker(factory_for(command), differential=True, areas=areas)
    found: dict[str, list[int]] = {FAILED: [], UNDECIDED: [], ERROR: []}
    try:
        for seed in range(worlds):
            outcome = checker.check(seed).outcome
            if outcome != PASSED:
                found.setdefault(outcome, []).append(seed)
    finally:
        checker.close()
    return found


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_the_stage_fails_no_world_of_an_outside_broker_beyond_those_listed(name: str) -> None:
    _present(CONFIGURATIONS[name][0])
    expected: dict[str, Any] = json.loads(EXPECTED.read_text())
    assert expected["generator"] == GENERATOR_VERSION, (
        "write the list again: python -m tests.variants.test_independent_stage"
    )
    listed = expected["configurations"][name]
    got = verdicts(name)
    worse = {o: sorted(set(got.get(o, [])) - set(listed.get(o, []))) for o in (FAILED, ERROR)}
    assert not any(worse.values()), f"{name}: worlds the stage newly rejects: {worse}"
    better = sorted(set(listed.get(FAILED, [])) - set(got.get(FAILED, [])))
    if better:
        print(f"{name}: worlds listed as failing that pass now: {better}; write the list again")


def main() -> None:
    """Writes the list again; with ``--worlds N`` (other than WORLDS) prints the verdicts on N worlds instead."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--worlds", type=int, default=WORLDS)
    worlds = parser.parse_args().worlds
    configurations = {name: verdicts(name, worlds) for name in CONFIGURATIONS}
    if worlds != WORLDS:
        for name, found in configurations.items():
            print(f"{name}: {worlds} worlds, " + ", ".join(f"{len(s)} {o} {s[:20]}" for o, s in found.items()))
        return
    lines = [f"  {json.dumps(name)}: {json.dumps(found)}" for name, found in configurations.items()]
    head = f'{{"generator": {GENERATOR_VERSION}, "worlds": {WORLDS}, "configurations": {{\n'
    EXPECTED.write_text(head + ",\n".join(lines) + "\n}}\n")
    for name, found in configurations.items():
        print(f"{name}: " + ", ".join(f"{len(seeds)} {outcome}" for outcome, seeds in found.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
