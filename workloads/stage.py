"""One world checked: generated, run on the implementation, held against the invariants and the reference.

This is what each Spark task does for every seed of its partition, and
what the shrinker calls again and again; it knows nothing of Spark.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from typing import Any

# the suite's statuses, so that summary.json and Parquet spell them as every other output does
from sbtck.contract import ERROR, FAILED, NOT_APPLICABLE, PASSED, Handshake
from sbtck.engine import CONNECTING_CHOICES, warn_if_stale
from sbtck.errors import ProtocolError, ReportImpossible
from sbtck.iut.implementation import Implementation
from sbtck.iut.log_check import LogCheck
from sbtck.iut.reference import ReferenceImplementation
from sbtck.workloads.differential import Carried, FollowingChooser, differ, reference_params
from sbtck.workloads.envelope import undefined
from sbtck.workloads.generate import GENERATOR_VERSION, StageWorld, area_of, generate, judged, needs
from sbtck.workloads.invariants import Invariants, Violation, check
from sbtck.workloads.reproduce import THEN, feature, then_steps, writable
from sbtck.workloads.search import histories, search
from sbtck.workloads.shrink import Shrunk, shrink
from sbtck.workloads.trace import Trace, execute, run

# the rule a report that cannot be breaks (sbtck/iut/log_check.py names the invariant in its detail)
REPORTED_IMPOSSIBLE = "INV-report"
# a world no branch of the search explained, with branches left untried when its budget ran out (search.py)
UNDECIDED = "undecided"


def undecided_reason(rules: list[str]) -> str:
    """Why a world with these rules is undecided, as summary.json counts it: the search's budget is the one cause
    left (a choice it does not branch on would fail the world, a report it need not compare is not compared), and
    the rule the furthest branch differed at says where to look."""
    return f"search budget spent, differing at {rules[0] if rules else 'no rule'}"


warn_if_stale("sbtck.workloads")  # generate, invariants and trace are among the compiled modules


@dataclass
class Outcome:
    """A world's row in the summary table; the failure columns are filled for failed and error worlds only."""

    seed: int
    version: int
    conversations: int
    operations: int
    instances: int
    events: int
    outcome: str
    rules: list[str] = field(default_factory=list)
    # the capabilities the world asks for: the stage's mix of worlds, as summary.json reports it
    capabilities: list[str] = field(default_factory=list)
    trace_hash: str = ""
    detail: str = ""
    script: str | None = None
    iut_trace: str | None = None
    reference_trace: str | None = None

    def row(self) -> dict[str, Any]:
        # the fields in declaration order, as asdict gives them, without its deep copy: every list here is the
        # outcome's own, and a row is made once per world
        return {name: getattr(self, name) for name in _OUTCOME_FIELDS}


_OUTCOME_FIELDS = tuple(f.name for f in fields(Outcome))


@dataclass
class Checked:
    """A world's violations of the invariants and its differences from every branch the search tried, the expected
    trace, and whether the search ran out of branches before it could say: then the differences are no failure."""

    invariants: list[Violation]
    differences: list[Violation]
    expected: Trace | None
    undecided: bool = False

    @property
    def found(self) -> list[Violation]:
        return self.invariants + self.differences

    @property
    def broken(self) -> list[Violation]:
        """What fails the world."""
        return self.invariants if self.undecided else self.found


def reported_impossible(world: StageWorld, trace: Trace) -> list[Violation]:
    """What the implementation reported that cannot be in the world, as the suite holds every answer
    (sbtck/iut/log_check.py): the first such report, at its step."""
    log_check = LogCheck()
    for index, (op, step) in enumerate(zip(world.script, trace.steps, strict=False)):
        try:
            log_check.answer(op, step["events"])
        except (ProtocolError, ReportImpossible) as impossible:
            return [Violation(REPORTED_IMPOSSIBLE, index, str(impossible))]
    return []


def violations(
    world: StageWorld, trace: Trace, handshake: Handshake | None, shown: frozenset[str] | None = None
) -> Checked:
    """The invariants always; what cannot be and the search of allowed histories when the implementation is not
    the reference itself, judging what SHOWN names (all it declares by default)."""
    found = check(world, trace)
    if handshake is None:
        return Checked(found, [], None)
    found += reported_impossible(world, trace)
    verdict = search(world, trace, handshake.params, frozenset(handshake.capabilities) if shown is None else shown)
    return Checked(found, verdict.violations, verdict.expected, verdict.undecided)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@contextmanager
def no_collections() -> Iterator[None]:
    """No cyclic garbage collection while a world is checked.

    A trace is thousands of small dicts that all live until the check ends;
    each pass of the collector walks them again, which cost a fifth of a
    small world's check and made a long world's cost grow faster than its
    length. What a world leaves in cycles (the engine's parts point at each
    other) is collected after it, at the thresholds the process had.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Reproducer:
    """A failing world shrunk for the rule it breaks and written as a feature, on one implementation, opened when
    first needed; the worlds are drawn within what it declares. The Checker checks worlds on it."""

    def __init__(
        self,
        factory: Callable[[], Implementation],
        differential: bool,
        conversations: int = 5,
        areas: tuple[str, ...] | None = None,
    ) -> None:
        self.factory = factory
        self.differential = differential
        self.conversations = conversations
        self.areas = areas  # the areas worlds are drawn in by turns; None: the first the implementation declares
        self.implementation: Implementation | None = None
        self.handshake: Handshake | None = None
        self._seen: dict[tuple[str, str], bool] = {}

    def _open(self) -> Implementation:
        if self.implementation is None:
            self.implementation = self.factory()
            self.handshake = self.implementation.handshake()
        return self.implementation

    def judged(self, seed: int) -> frozenset[str]:
        """What the seed's world judges of what the implementation declares (generate.SCOPES)."""
        assert self.handshake is not None
        return judged(seed, self.handshake.capabilities, self.areas)

    def world(self, seed: int) -> StageWorld:
        """The seed's world, drawn within what the implementation declares (everything, until it has said)."""
        capabilities = None if self.handshake is None else self.handshake.capabilities
        return generate(seed, self.conversations, capabilities, self.areas)

    def _verdict(self, world: StageWorld) -> tuple[set[str], list[int]]:
        """The rules this world breaks, and the commands both sides refuse."""
        try:
            trace = run(world, self._open())
        except Exception:
            self.close()
            return set(), []
        checked = violations(world, trace, self.handshake if self.differential else None, self.judged(world.seed))
        theirs = checked.expected.steps if checked.expected is not None else trace.steps
        refused = [i for i, (a, b) in enumerate(zip(trace.steps, theirs, strict=True)) if a["error"] and b["error"]]
        return {v.rule for v in checked.broken}, refused

    def breaks(self, world: StageWorld, rule: str, tidy: bool = False) -> bool:
        """Does this world still break RULE (and, when TIDY, with no command that both sides refuse)?

        A topology the kit's own files would refuse cannot be a reproducer, however the implementation takes it.
        The same world is checked once (the shrinker's passes meet the same candidates again).
        """
        if not writable(world.topology) or undefined(world):
            # nor can a world that holds what the documents leave undefined: a reply whose first message no longer
            # surely arrived once the shrinker dropped commands or shortened time (envelope.py)
            return False
        # a smaller world must stay within what the implementation declares: dropping AutoCreatedLocal from an
        # activation world would make it a routing question
        if self.handshake is not None and not needs(world) <= self.judged(world.seed):
            return False
        if tidy:
            rules, refused = self._verdict(world)
            return rule in rules and not refused
        key = (rule, hashlib.sha256(_json(world.script).encode()).hexdigest())
        if key not in self._seen:
            self._seen[key] = self._breaks_early(world, rule)
        return self._seen[key]

    def _breaks_early(self, world: StageWorld, rule: str) -> bool:
        """RULE broken, found running the implementation and the reference in step, stopping where it shows.

        The same verdict as the whole check, at the cost of the world's prefix
        up to the break: a shrinker's failing candidates cost little however
        long the world. The first branch of each connecting choice runs in
        step with the implementation; where all of them differ, the search
        (search.py) settles the prefix: every branch that could explain the
        whole trace must explain its prefix, so a prefix no branch explains
        fails the world with the same difference. A prefix some branch does
        explain goes on as the whole check.
        """
        try:
            implementation = self._open()
            assert self.handshake is not None
            invariants = Invariants(world)
            references: list[tuple[ReferenceImplementation, FollowingChooser, Carried]] = []
            if self.differential:
                params = reference_params(self.handshake.params)
                for broker in CONNECTING_CHOICES:
                    chooser = FollowingChooser()
                    reference = ReferenceImplementation(broker, params=params, chooser=chooser)
                    references.append((reference, chooser, Carried()))
            shown = self.judged(world.seed)
            trace = Trace(world.seed)
            for index, op in enumerate(world.script):
                got = execute(op, implementation)
                trace.steps.append(got)
                if any(v.rule == rule for v in invariants.step(index, op, got)):
                    return True
                differences = []
                for reference, chooser, carried in references:
                    chooser.feed(got["events"])
                    differences.append(differ(index, got, execute(op, reference), shown, carried))
                if references and all(differences):
                    prefix = StageWorld(world.seed, world.version, world.topology, world.script[: index + 1])
                    verdict = search(prefix, trace, self.handshake.params, shown)
                    if not verdict.violations:
                        return self._finishes_broken(world, trace, rule)
                    if not verdict.undecided and any(v.rule == rule for v in verdict.violations):
                        return True
                    references = []  # the differences are settled; the invariants still run to the end
                    continue
                references = [pair for pair, different in zip(references, differences, strict=True) if not different]
            return any(v.rule == rule for v in invariants.end(len(world.script)))
        except Exception:
            self.close()
            return False

    def _finishes_broken(self, world: StageWorld, trace: Trace, rule: str) -> bool:
        """The whole check of WORLD, whose TRACE so far the search explained."""
        assert self.implementation is not None
        trace.steps += [execute(op, self.implementation) for op in world.script[len(trace.steps) :]]
        return any(v.rule == rule for v in violations(world, trace, self.handshake, self.judged(world.seed)).broken)

    def reproduce(
        self,
        outcome: Outcome,
        max_tests: int = 3000,
        budget_s: float | None = None,
        tried: Callable[[], None] | None = None,
    ) -> tuple[str, Shrunk]:
        """The failing world shrunk for its first broken rule, as a feature (within BUDGET_S seconds of shrinking;
        TRIED is told of every run)."""
        assert outcome.script is not None
        self._open()
        world = self.world(outcome.seed)
        world.script = json.loads(outcome.script)
        world.topology = world.script[0]["topology"]
        rule = outcome.rules[0]
        shrunk = shrink(
            world,
            lambda w: self.breaks(w, rule),
            max_tests,
            refused=lambda w: self._verdict(w)[1],
            tidy=lambda w: self.breaks(w, rule, tidy=True),
            budget_s=budget_s,
            tried=tried,
        )
        trace = run(shrunk.world, self._open())
        shown = self.judged(shrunk.world.seed)
        checked = violations(shrunk.world, trace, self.handshake if self.differential else None, shown)
        rules = sorted({v.rule for v in checked.found} | {rule})
        assert self.handshake is not None
        then, chose_otherwise, open_choice = THEN, False, False
        if checked.expected is not None:
            # a stated log must pass on the reference engine of the suite, which takes each choice the documents
            # leave open its own way. Where the implementation took another, the table would either blame it for
            # an allowed choice or fail the reference: the check is then the searched one alone, which allows both
            followed = search(shrunk.world, trace, self.handshake.params, shown, readings=False).expected
            own = run(shrunk.world, ReferenceImplementation(params=reference_params(self.handshake.params)))
            start = shrunk.world.start_ms
            then = then_steps(followed.events(), trace.events(), shown, start)
            chose_otherwise = then_steps(own.events(), trace.events(), shown, start) != then
            if chose_otherwise:
                then = THEN
            elif then != THEN:
                # a stated log of one history would fail a broker taking another the documents allow once it is
                # mended (a reproducer is meant to become a regression scenario): the table allows every history
                # of the world, and where they do not line up, where one refuses a command another takes, or where
                # they are too many to tell, the check searches them
                allowed = histories(shrunk.world, trace, self.handshake.params, shown)
                refusals = [s["error"] is None for s in followed.steps]
                if allowed is None or any([s["error"] is None for s in h.steps] != refusals for h in allowed):
                    then = THEN
                else:
                    others = [h.events() for h in allowed]
                    named = _identical_routes(shrunk.world)
                    then = then_steps(followed.events(), trace.events(), shown, start, others, named)
                open_choice = then == THEN
        by = f"{shrunk.tests} test runs, {shrunk.seconds:.1f} s" + (
            ", stopped by its time budget" if shrunk.out_of_time else ""
        )
        return feature(shrunk.world, rules, self.handshake.name, by, then, chose_otherwise, open_choice), shrunk

    def close(self) -> None:
        if self.implementation is not None:
            try:
                self.implementation.close()
            finally:
                self.implementation, self.handshake = None, None


def _identical_routes(world: StageWorld) -> bool:
    """Whether two routes of one route table, the topology's or those the world's commands make (by name, the last
    of each), are alike in broker instance, service name and address: which member names their group is then
    open (RTC-0)."""
    tables: dict[tuple[str, str | None], dict[str, dict[str, Any]]] = {}
    for i in world.topology["instances"]:
        tables[(i["name"], None)] = {r["name"]: r for r in i["msdb_routes"]}
        for d in i["databases"]:
            tables[(i["name"], d["name"])] = {r["name"]: r for r in d["routes"]}
    for op in world.script:
        if isinstance(op.get("route"), dict):
            tables.setdefault((str(op.get("instance")), op.get("database")), {})[op["route"]["name"]] = op["route"]
    for routes in tables.values():
        alike = [
            (r.get("broker_instance"), r.get("service_name"), str(r.get("address")).upper()) for r in routes.values()
        ]
        if len(set(alike)) < len(alike):
            return True
    return False


class Checker(Reproducer):
    """Checks worlds one after another on one implementation (a Spark partition's adapter), and reproduces a failing
    one (``Reproducer``)."""

    def check(self, seed: int) -> Outcome:
        try:
            with no_collections():
                return self._check(seed)
        except Exception as exc:  # whatever an implementation's answers made of the check: this world's, not the job's
            with suppress(Exception):
                self.close()
            return Outcome(
                seed,
                GENERATOR_VERSION,
                0,
                0,
                0,
                0,
                ERROR,
                detail=f"world {seed}: its check failed: {type(exc).__name__}: {exc}"[:4000],
            )

    def _check(self, seed: int) -> Outcome:
        try:
            implementation = self._open()
        except Exception as exc:  # an implementation that cannot start fails this world, not the job
            self.close()
            world = self.world(seed)
            return Outcome(
                seed,
                world.version,
                world.conversations,
                len(world.script),
                len(world.topology["instances"]),
                0,
                ERROR,
                detail=f"world {seed}: the implementation failed: {type(exc).__name__}: {exc}"[:4000],
                script=_json(world.script),
            )
        assert self.handshake is not None
        try:
            area_of(seed, frozenset(self.handshake.capabilities), self.areas)
        except ValueError as exc:  # no world of the areas asked for applies to what it declares
            return Outcome(seed, GENERATOR_VERSION, 0, 0, 0, 0, NOT_APPLICABLE, detail=str(exc))
        world = self.world(seed)
        needed = needs(world)
        base = Outcome(
            seed,
            world.version,
            world.conversations,
            len(world.script),
            len(world.topology["instances"]),
            0,
            PASSED,
            capabilities=sorted(needed),
        )
        try:
            missing = needed - self.judged(seed)
            if missing:  # the generator draws within the capabilities: this guards its promise
                base.outcome, base.detail = NOT_APPLICABLE, "needs " + ", ".join(sorted(missing))
                return base
            trace = run(world, implementation)
        except Exception as exc:  # a crash of the implementation is this world's result, not the job's
            self.close()
            base.outcome = ERROR
            base.detail = f"world {seed}: the implementation failed: {type(exc).__name__}: {exc}"[:4000]
            base.script = _json(world.script)
            return base
        base.events = sum(len(s["events"]) for s in trace.steps)
        base.trace_hash = trace.digest()
        checked = violations(world, trace, self.handshake if self.differential else None, self.judged(seed))
        found, expected = checked.found, checked.expected
        if found:
            # differences alone, with branches left untried, may still be allowed: undecided, never failed
            base.outcome = FAILED if checked.broken else UNDECIDED
            base.rules = list(dict.fromkeys(v.rule for v in found))  # invariants first: the most precise
            base.detail = "; ".join(f"{v.rule} at step {v.at_step}: {v.detail}" for v in found[:5])[:4000]
            if base.outcome == UNDECIDED:
                base.detail = f"{undecided_reason(base.rules)}: {base.detail}"[:4000]
            base.script = _json(world.script)
            base.iut_trace = _json(trace.steps)
            base.reference_trace = None if expected is None else _json(expected.steps)
        return base


def check_seeds(
    seeds: Iterable[int],
    factory: Callable[[], Implementation],
    differential: bool,
    conversations: int = 5,
    areas: tuple[str, ...] | None = None,
) -> Iterator[dict[str, Any]]:
    checker = Checker(factory, differential, conversations, areas)
    try:
        for seed in seeds:
            yield checker.check(seed).row()
    finally:
        checker.close()
