"""The brokers written in a clean room pass the suite and the stage, as the kit promises a stranger (README.md here).

Each runs the whole Gherkin suite and worlds of the stage, drawn by turns in every area, with and without the
decision trace: a day's sample of 100 of the first 300 worlds, another each day, and all 300 with
``SBTCK_TEST_SAMPLE=all`` (tests/sampling.py). The stage's verdict on them is strict: no failed world beyond
those listed in KNOWN with where the question stands, and at most 1% of the 300 undecided (issue 43 asks no
failed world of a correct implementation of every capability; a listed world is one not yet decided from the
documents, or the broker's own fault).
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from sbtck.iut.loader import factory_for
from sbtck.reports.results import PASSED
from sbtck.workloads.generate import AREAS
from sbtck.workloads.stage import UNDECIDED, Checker
from tests.helpers import Run, kit
from tests.sampling import sample

HERE = Path(__file__).parent
WORLDS = 300
# a day's sample of each broker's WORLDS (another each day, every one with SBTCK_TEST_SAMPLE=all: tests/sampling.py)
WORLDS_PER_DAY = 100
UNDECIDED_AT_MOST = WORLDS // 100
PYTHON = shutil.which("python3") or sys.executable
# each broker's command with its decision trace and without, as its NOTES.md says to run it
BROKERS: dict[str, dict[str, str]] = {
    "cr1": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr1' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR1_NO_TRACE=1 {PYTHON} {HERE / 'cr1' / 'broker.py'}",
    },
    # its author got as far as activation, external activation and routing: what it declares
    "cr2": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr2' / 'broker.py'} --routing --trace",
        "black box": f"cmd:{PYTHON} {HERE / 'cr2' / 'broker.py'} --routing",
    },
    # a sixth author's (stop 54), from the docs of protocol 2.2: every capability
    "cr3": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr3' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR6_NO_TRACE=1 {PYTHON} {HERE / 'cr3' / 'broker.py'}",
    },
    # a seventh author's (stop 55), from the docs of protocol 2.2 and a frozen copy of the kit: every capability
    "cr4": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr4' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR7_NO_TRACE=1 {PYTHON} {HERE / 'cr4' / 'broker.py'}",
    },
    # an eighth author's (stop 55), from the docs of protocol 2.2 and a frozen copy of the kit: every capability
    "cr5": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr5' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR8_NO_TRACE=1 {PYTHON} {HERE / 'cr5' / 'broker.py'}",
    },
    # a ninth author's (stop 56), from the docs of protocol 2.2 and an installed copy of the kit: every capability
    "cr6": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr6' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR9_NO_TRACE=1 {PYTHON} {HERE / 'cr6' / 'broker.py'}",
    },
    # a tenth author's (stop 56), the same way, from the kit with the ninth's questions answered: every capability
    "cr7": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr7' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR10_NO_TRACE=1 {PYTHON} {HERE / 'cr7' / 'broker.py'}",
    },
    # an eleventh author's (stop 57), the same way, from the kit with the tenth's questions not yet answered
    "cr8": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr8' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR11_NO_TRACE=1 {PYTHON} {HERE / 'cr8' / 'broker.py'}",
    },
    # a twelfth author's (stop 57), from the kit of protocol 2.3 with the tenth's and eleventh's questions answered
    "cr9": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr9' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR12_NO_TRACE=1 {PYTHON} {HERE / 'cr9' / 'broker.py'}",
    },
    # a thirteenth author's (stop 59), from the kit of stop 58: every capability, no change of the kit needed
    "cr10": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr10' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR13_NO_TRACE=1 {PYTHON} {HERE / 'cr10' / 'broker.py'}",
    },
    # a fourteenth author's (stop 60), from the kit of stop 59: every capability, no change of the kit needed
    "cr11": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr11' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR14_NO_TRACE=1 {PYTHON} {HERE / 'cr11' / 'broker.py'}",
    },
    # a fifteenth author's (stop 61), from the kit of stop 60: every capability, no change of the kit needed; its
    # allowed variant V2 found one (NOTES.md, D1: test_an_allowed_variant_of_cr12_passes_the_worlds_it_was_failed)
    "cr12": {
        "decision trace": f"cmd:{PYTHON} {HERE / 'cr12' / 'broker.py'}",
        "black box": f"cmd:env SBTCK_CR15_NO_TRACE=1 {PYTHON} {HERE / 'cr12' / 'broker.py'}",
    },
}
# the areas each is judged in, by turns: those of what it declares
AREAS_OF = {
    "cr1": AREAS,
    "cr2": ("routing", "activation"),
    "cr3": AREAS,
    "cr4": AREAS,
    "cr5": AREAS,
    "cr6": AREAS,
    "cr7": AREAS,
    "cr8": AREAS,
    "cr9": AREAS,
    "cr10": AREAS,
    "cr11": AREAS,
    "cr12": AREAS,
}
# the worlds (of the first WORLDS) the stage still fails a broker in, each with where the question stands: a world
# failing that is not listed fails the test, and a listed world that passes is reported so the list only shrinks
KNOWN: dict[tuple[str, str], dict[int, str]] = {}
# the scenarios a broker fails where the documents make it wrong (decided by the team; its NOTES.md says so too)
WRONG: dict[str, dict[str, str]] = {
    # the activation document: "information about the stored procedures started by Service Broker is contained in
    # sys.dm_broker_activated_tasks"; the procedure started as task 1 is stall, and it still runs as stall
    "cr6": {
        "activation/05_internal_activation.feature::[12] ": "ACT-11, a task's procedure_name is the queue's current one"
    },
}
CASES = [(name, mode) for name, modes in BROKERS.items() for mode in modes]
IDS = [f"{name}, {mode}" for name, mode in CASES]


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_the_suite_passes_a_clean_room_broker(name: str, mode: str, tmp_path: Path) -> None:
    # a scenario of a capability the broker does not declare is not applicable: it decides nothing
    proc = kit("run", "--iut", BROKERS[name][mode], "--out", str(tmp_path), timeout=900)
    run = Run(proc.returncode, proc.stdout + proc.stderr, tmp_path)
    not_passed = run.unexpected(WRONG.get(name, {}), fine=("passed", "differs", "not applicable"))
    assert not not_passed, "\n".join(not_passed) or run.output[-3000:]
    assert run.code == (1 if "failed" in run.statuses().values() else 0), run.output[-3000:]


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_the_stage_fails_no_world_of_a_clean_room_broker(name: str, mode: str) -> None:
    checker = Checker(factory_for(BROKERS[name][mode]), differential=True, areas=AREAS_OF[name])
    known = KNOWN.get((name, mode), {})
    outcomes: Counter[str] = Counter()
    failed: list[int] = []
    not_passed: list[str] = []
    try:
        for seed in sample(range(WORLDS), WORLDS_PER_DAY, f"clean-room worlds: {name}, {mode}"):
            outcome = checker.check(seed)
            outcomes[outcome.outcome] += 1
            if outcome.outcome != PASSED:
                not_passed.append(f"world {seed}: {outcome.outcome} {outcome.detail[:300]}")
            if outcome.outcome not in (PASSED, UNDECIDED):
                failed.append(seed)
    finally:
        checker.close()
    shown = "\n".join(not_passed[:10])
    assert set(failed) <= set(known), f"{dict(outcomes)}, worlds not listed: {set(failed) - set(known)}\n{shown}"
    assert outcomes[UNDECIDED] <= UNDECIDED_AT_MOST, f"{dict(outcomes)}\n{shown}"
    if set(known) - set(failed):
        print(f"{name}, {mode}: listed worlds that pass now, to take off KNOWN: {sorted(set(known) - set(failed))}")


# cr12's author ran its broker with one allowed choice flipped (the transport connects only once notified): the
# stage failed worlds 51, 135, 216 and 747, where a message held behind one that waited for its connection is routed
# and sent on once that one goes on to wait at a forwarder, which implementing.md section 5 allows. The reference
# engine could not take that choice where a message goes on where it was routed (engine/router.py,
# SendsWhereRouted). Once it could, worlds 151 and 175 were undecided: such a message, arriving where the one ahead
# waits, waited behind it and went on with it at that instant, and the search, guided by its going on, tried it
# matched on its own first (differential.py, FollowingChooser.waited_first).
NOTIFIED = f"cmd:{PYTHON} {HERE / 'cr12' / 'notified.py'}"


def test_an_allowed_variant_of_cr12_passes_the_worlds_it_was_failed() -> None:
    checker = Checker(factory_for(NOTIFIED), differential=True)
    try:
        outcomes = {seed: checker.check(seed).outcome for seed in (51, 135, 216, 747, 151, 175)}
    finally:
        checker.close()
    assert set(outcomes.values()) == {PASSED}, outcomes
