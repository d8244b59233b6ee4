"""The stage finds every deliberately wrong broker, shrinks the failing world, and writes a reproducer that works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from filelock import FileLock

from sbtck.iut.loader import factory_for
from sbtck.iut.reference import ReferenceImplementation
from sbtck.reports.results import FAILED
from sbtck.steps import phrases
from sbtck.workloads.generate import generate
from sbtck.workloads.shrink import ddmin, shrink
from sbtck.workloads.stage import Checker
from tests.helpers import sbtck
from tests.sampling import sample
from tests.variants import activation, allowed, periodic, routing
from tests.workloads.test_worlds import NOT_IN_WORLDS

VARIANTS = (
    [f"tests.variants.activation:{v}" for v in activation.VARIANTS if v not in activation.NOT_IN_WORLDS]
    + [
        f"tests.variants.routing:{v}"
        for v in routing.VARIANTS
        if v not in routing.NOT_IN_WORLDS | routing.RARE_IN_MIXED_WORLDS
    ]
    + [
        f"tests.variants.periodic:{v}"
        for v in periodic.VARIANTS
        if v not in periodic.NOT_IN_WORLDS | periodic.RARE_IN_MIXED_WORLDS
    ]
)
# the module's tests share the reproducers, minutes to make: on one worker, made once (scripts/test.sh's loadgroup)
pytestmark = pytest.mark.xdist_group("shrink")
REFUSALS = phrases.REFUSALS_RECORDED.source
# every variant shows in the first worlds; the stage is not asked to be lucky. The rarest is a dispatcher counting
# its 10 seconds from the SEND (3 worlds in the first 1,000 of generator 4, the first at seed 63): it needs a message
# delayed on its way and then held by a stopped dispatcher
SEARCH = 1000
MOST_STEPS = 12


def test_ddmin_finds_the_smallest_failing_subset() -> None:
    budget = [1000]
    assert ddmin(list(range(100)), lambda xs: {17, 62} <= set(xs), budget) == [17, 62]
    assert ddmin(list(range(10)), lambda xs: True, [1000]) == []
    assert budget[0] > 900


def test_ddmin_stops_when_the_budget_is_spent() -> None:
    calls: list[int] = []

    def test(xs: list[int]) -> bool:
        calls.append(len(xs))
        return 500 in xs

    ddmin(list(range(1000)), test, [5])
    assert len(calls) == 5


def test_shrinking_keeps_the_failure_and_drops_the_rest() -> None:
    world = generate(3, conversations=40)
    dialog = next(op["dialog"] for op in world.script if op["kind"] == "begin_dialog")

    def fails(candidate: object) -> bool:
        script = candidate.script  # type: ignore[attr-defined]
        return any(op["kind"] == "send" and op["dialog"] == dialog for op in script)

    shrunk = shrink(world, fails)
    kinds = [op["kind"] for op in shrunk.world.script]
    assert kinds.count("send") == 1 and len(kinds) <= 5, kinds
    assert shrunk.world.topology["instances"][0]["name"] == "sql1"
    assert len(shrunk.world.topology["instances"]) == 1


# made once a run: the module's xdist_group keeps its tests on one worker (tests/grouping.py); under another --dist
# the first worker to ask makes them under a file lock and the other reads what it wrote (xdist's own recipe)
@pytest.fixture(scope="session")
def reproducers(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Path]:
    if worker_id == "master":
        return _made(tmp_path_factory.mktemp("reproducers"))
    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, the same for every worker
    made = shared / "reproducers.json"
    with FileLock(str(shared / "reproducers.lock")):
        if not made.is_file():
            out = _made(shared / "reproducers")
            made.write_text(json.dumps({spec: str(path) for spec, path in out.items()}))
    return {spec: Path(path) for spec, path in json.loads(made.read_text()).items()}


def _made(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for spec in VARIANTS:
        checker = Checker(factory_for(f"python:{spec}"), differential=True)
        outcome = next((o for o in map(checker.check, range(SEARCH)) if o.outcome == FAILED), None)
        assert outcome is not None, f"the stage found nothing wrong with {spec} in {SEARCH} worlds"
        text, _ = checker.reproduce(outcome)
        checker.close()
        lines = text.splitlines()
        when = next(i for i, line in enumerate(lines) if line.startswith("    When "))
        # the world's commands: the Givens after the topology and the When (a refusal recorded is no command)
        steps = 1 + sum(line.startswith("    And ") and REFUSALS not in line for line in lines[:when])
        assert steps <= MOST_STEPS, (spec, text)
        assert f"@{outcome.rules[0]}" in text.splitlines()[0]
        path = folder / f"{spec.split(':')[1]}.feature"
        path.write_text(text)
        out[spec] = path
    return out


def test_every_reproducer_passes_on_the_reference_engine(reproducers: dict[str, Path], tmp_path: Path) -> None:
    folder = next(iter(reproducers.values())).parent
    run = sbtck("--features", str(folder), out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert len(run.statuses()) == len(VARIANTS)
    assert set(run.statuses().values()) == {"passed"}


def test_a_reproducer_states_no_log_where_the_implementation_chose_otherwise(reproducers: dict[str, Path]) -> None:
    # a broker ignoring the broker instance delivers a message the reference drops at RTL-2 (LOCAL_MISS): the stage
    # follows its 'not dropped' as the allowed 'delayed', which the reference engine does not take on its own
    text = reproducers["tests.variants.routing:locate_ignores_broker_instance"].read_text()
    assert "took another of the choices the documents leave open" in text
    assert "the log shows" not in text
    assert "the reference engine, making the same allowed choices, gives the same outcome" in text


@pytest.mark.parametrize("spec", VARIANTS)
def test_the_reproducer_fails_on_the_wrong_broker_it_came_from(
    spec: str, reproducers: dict[str, Path], tmp_path: Path
) -> None:
    run = sbtck("--features", str(reproducers[spec]), "--iut", f"python:{spec}", out=tmp_path)
    assert run.code == 1, run.output[-3000:]
    assert list(run.statuses().values()) == ["failed"]
    # a stated log fails with the table it expected beside the log it got, or on a kind it says is absent;
    # the fallback re-checks the recorded trace
    # ... or, before any Then step, on a report that cannot be (the log check of every answer)
    stated = "Then the log shows exactly:" in reproducers[spec].read_text()
    said = (
        ("the log differs", "expected 0 ", "(invariant: ")
        if stated
        else ("the workload stage's checks fail", "(invariant: ")
    )
    assert any(words in run.output for words in said), run.output[-3000:]


# the engine's own open choices taken the other way (tests/variants/allowed.py), a day's sample of them; not those
# declaring other open values than the reference (resending, a principal's retry): a reproducer's seconds are those
# of the values the implementation it came from declared (README.md, "the randomized stage")
_REFERENCE_VALUES = ReferenceImplementation().handshake().params
ALLOWED_TODAY = sample(
    [
        name
        for name in allowed.ALLOWED
        if name not in NOT_IN_WORLDS and getattr(allowed, name)().handshake().params == _REFERENCE_VALUES
    ],
    4,
    "reproducers on allowed brokers",
)


@pytest.mark.parametrize("name", ALLOWED_TODAY)
def test_a_reproducer_passes_a_broker_taking_another_allowed_choice(
    name: str, reproducers: dict[str, Path], tmp_path: Path
) -> None:
    # a reproducer is meant to become a regression scenario: a log it states that holds one history of its world
    # against another the documents allow fails the broker it came from once that broker is mended onto the other
    # (cr14's D1-D3: GET CONVERSATION GROUP read as no RECEIVE, a lost principal forgotten)
    folder = next(iter(reproducers.values())).parent
    run = sbtck("--features", str(folder), "--iut", f"python:tests.variants.allowed:{name}", out=tmp_path)
    not_passed = run.unexpected({}, fine=("passed", "differs", "not applicable"))
    assert not not_passed, "\n".join(not_passed) or run.output[-3000:]


def test_many_reproducers_state_what_should_be_seen(reproducers: dict[str, Path]) -> None:
    # a log is stated only where every history the documents allow for the world lines up with it (per kind at
    # least) and shows the difference: 37 of the 73 at stop 60. Before, the log of the one history the search
    # followed was stated in at least 80% of them, and those logs failed 13 of the 45 allowed brokers (test above)
    stated = [spec for spec, path in reproducers.items() if "Then the log shows exactly:" in path.read_text()]
    assert len(stated) >= 0.45 * len(reproducers), sorted(set(reproducers) - set(stated))


def test_a_missing_features_path_is_refused(tmp_path: Path) -> None:
    run = sbtck("--features", str(tmp_path / "nowhere"), out=tmp_path)
    assert run.code == 2
    assert "no such file or folder" in run.output


@pytest.mark.parametrize(
    "spec",
    [
        "tests.variants.activation:ignores_max_queue_readers",
        "tests.variants.routing:pinning_ignored",
        "tests.variants.periodic:no_broker_restart",
    ],
)
def test_the_check_that_stops_early_gives_the_whole_checks_verdict(spec: str) -> None:
    checker = Checker(factory_for(f"python:{spec}"), differential=True)
    rules = ["ACT-10", "ACT-09", "RTE-04", "PER-5C", "DIFF", "INV-messages"]
    missed: list[tuple[int, str]] = []
    try:
        for seed in range(40):
            world = checker.world(seed)
            whole, _ = checker._verdict(world)
            early = {rule for rule in rules if checker._breaks_early(world, rule)}
            # never a break the whole check does not find; it may miss one whose prefix the search leaves
            # undecided within its budget (no_broker_restart's world 13 since the searched choices of a line: a
            # known regression, the shrinker then keeps fewer candidates)
            assert early <= whole & set(rules), seed
            missed.extend((seed, rule) for rule in whole & set(rules) - early)
    finally:
        checker.close()
    assert len(missed) <= 3, missed


def test_a_long_world_that_breaks_early_shrinks_from_its_prefix() -> None:
    world = generate(5, conversations=300)
    first = next(op["dialog"] for op in world.script if op["kind"] == "send")
    tried: list[int] = []

    def fails(candidate: object) -> bool:
        script = candidate.script  # type: ignore[attr-defined]
        tried.append(len(script))
        return any(op["kind"] == "send" and op["dialog"] == first for op in script)

    shrunk = shrink(world, fails)
    assert [op["kind"] for op in shrunk.world.script].count("send") == 1
    # halving the prefix first: the long candidates are few, whatever the world's length
    assert sum(1 for n in tried if n > len(world.script) // 4) <= 4, sorted(tried, reverse=True)[:10]


def test_a_reproducer_that_fails_on_the_reference_is_not_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reproducer states what the reference gives: one the reference fails would blame the implementation for the
    kit's own mistake, so the stage deletes it and says so."""
    from sbtck.workloads.job import checked_both_ways

    topology = '    Given the topology "activation"\n'
    (tmp_path / "world-1.feature").write_text(
        f'Feature: kept\n  Scenario: kept\n{topology}    Then the log has 1 "broker started" event\n'
    )
    (tmp_path / "world-2.feature").write_text(
        f'Feature: dropped\n  Scenario: dropped\n{topology}    Then the log has 2 "broker started" events\n'
    )
    written = [{"rule": "ACT-10", "seed": seed, "path": f"reproducers/world-{seed}.feature"} for seed in (1, 2)]
    kept, dropped = checked_both_ways(tmp_path, written, "reference")
    assert [entry["seed"] for entry in kept] == [1]
    assert [entry["seed"] for entry in dropped] == [2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["world-1.feature"]
    assert (
        "dropped the reproducer of seed 2 (ACT-10): its scenario is failed on the reference engine"
        in capsys.readouterr().out
    )
