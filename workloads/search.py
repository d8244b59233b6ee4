"""The allowed histories searched: is there a way the reference may go that shows what the implementation showed?

Design note
-----------
Where the documents leave a choice open (which route, which broker
instance, which database first, whom to ask after a lost principal, who
gets a released conversation group, when the transport connects, which
waiting dialogs a route change reclassifies and in which order, which
of a timer notification and a procedure's step of one instant comes
first, whether a message behind one the forwarder deleted follows it; the
readings of a whole run are listed in ``sbtck/engine/choosing.py``), the
reference engine asks its chooser. An implementation may take any allowed
option at each, so one run of the reference proves nothing when it differs;
the check must find *some* sequence of allowed picks that gives the
implementation's trace, as Knossos searches the histories a register allows.

What the search keeps true:

1. **Every pick is allowed.** A branch is a sequence of picks, each an index
   into the options the engine offered at that point (``Branch``); the engine
   never sees an option it could not take, so an agreeing branch is a
   behaviour the rules allow.
2. **Fewest departures first.** Among the branches still to try, those
   that depart from the guide at the fewest picks about one message or
   session run first (limited discrepancy search); a reading of the whole
   run (how the transport connects, whether GET CONVERSATION GROUP is a
   RECEIVE, when a queue monitor looks) costs nothing to depart from, since
   there are a few and the guide cannot read them from the trace. The order
   changes how soon an agreeing branch is found, never whether.
3. **Pruned at the first disagreement.** A branch runs step by step beside
   the implementation's trace and stops at the first step that differs, at
   the earliest instant an event differs (``difference``). Everything before
   that instant agreed, and the engine runs in time order, so a pick made
   after it cannot change what differs: only the picks made at or before
   that instant get their other options tried, and later picks are never
   enumerated. At that very instant, a
   pick about one message or session (the routing of D2, the group a
   session's RECEIVE takes) is tried again only if an event that differs
   is about it too, or about no message or session at all (a connection,
   a timer): a pick shows in the events of what it was about, so one about
   something that agrees there left no trace on what differs. A command
   whose answer itself differs (a refusal, a view's rows) counts every pick
   of its step. A pick whose other option shows at its own instant or not at
   all (``SHOWS_AT_ITS_INSTANT``: the order of the instances' periodic tasks
   at a notification) is tried again only where the difference is at its
   instant: before it, what its instant showed agreed. It is asked at every
   notification of a world of several instances where a message waits or is
   buffered, and tried again at each it would double the tree.
4. **Guided, not guessed.** The options at each point are ranked with the
   implementation's own pick first, as ``FollowingChooser`` reads it from the
   trace (its decision trace, or where its messages went), then in the
   reference's order. A correct implementation is usually explained by the
   first branch, so the search costs one run where the old check cost one;
   the guide orders the search and never decides it.
5. **Connecting choices are picks too.** Which broker runs (``CONNECTING_CHOICES``:
   connect at a SEND or when notified, match again once connected or not) is
   the first pick of every branch.
6. **Bounded.** The branches together may run at most ``budget`` times the
   world's length in steps: a branch that differs soon after its own new
   pick costs little, so the many alternatives that show at once (another
   route, another probe) are all tried. A world whose tree is not exhausted
   within it is *undecided*: no branch agreed, but an untried one might
   have, so it is never called failed. A world is *failed* only when every
   branch was tried and each differed.
7. **Only what can show is searched, and what showed is not.** A choice
   that shows at once where it shows at all (how many task handlers an
   instance starts: ``OPEN_WITH``) is no point of the tree: the count the
   implementation reported decides it, and for one without the capability
   that reports it, the reference's pick stands. Tried as picks, five
   instances' counts made every failing world of a wrong broker
   undecided.
8. **The difference shown is the furthest.** When no branch agrees, the one
   that agreed longest names the step and the rules, and runs on to the end
   for the expected trace.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbtck.engine import CONNECTING_CHOICES
from sbtck.engine.choosing import OPEN_WITH, OPEN_WITHOUT, READINGS, SHOWS_AT_ITS_INSTANT, Addresses, FirstChooser
from sbtck.iut.reference import ReferenceImplementation
from sbtck.workloads.differential import Carried, FollowingChooser, difference, reference_params
from sbtck.workloads.generate import StageWorld
from sbtck.workloads.invariants import Violation
from sbtck.workloads.landscape import ALL
from sbtck.workloads.trace import Trace, execute

# how many whole runs of the world the branches may cost together before it is undecided: a correct
# implementation takes one, a wrong one the whole tree, most of whose branches differ at their own new pick. 64 until
# stop 55, whose new choices (LOST_PRINCIPAL, a reading at each lost principal, doubles the tree there) left the
# wrong variant never_asks_a_lost_principal_again undecided in world 383 (tests/workloads/test_search.py)
BUDGET = 128


class Branch:
    """A chooser that replays PICKS, then takes the guide's pick at every new point and records the points."""

    def __init__(
        self,
        picks: list[int],
        guide: FollowingChooser,
        capabilities: frozenset[str] = frozenset(),
        readings: bool = True,
        follow_reported: bool = True,
    ) -> None:
        self.picks = picks
        self.guide = guide
        self.capabilities = capabilities
        self.open_readings = readings  # False: the reference's own reading of each, as the suite runs it
        # False: a choice that shows at once is a point of the tree too (``histories``: every history allowed)
        self.follow_reported = follow_reported
        self.taken: list[int] = []
        self.widths: list[int] = []
        # when each pick was made, in the reference's time (the connecting choice before any), and what it was
        # about (a dialog or a session; None for a reading of the whole run)
        self.times: list[int] = []
        self.subjects: list[str | None] = []
        self.subject: str | None = None
        self.readings: list[bool] = []  # whether each pick is a reading of the whole run (READINGS)
        self.at_its_instant: list[bool] = []  # whether each pick shows at its own instant or not at all
        self.now: Callable[[], int] = lambda: -1
        self.reference_order = FirstChooser()

    def take(self, width: int, reading: bool = False, kind: str = "") -> int:
        """The index of the next pick among WIDTH options: replayed, or the first (the guide's) when new."""
        n = len(self.taken)
        index = self.picks[n] if n < len(self.picks) else 0
        self.taken.append(index)
        self.widths.append(width)
        self.times.append(self.now())
        self.subjects.append(None if reading else self.subject)
        self.readings.append(reading)
        self.at_its_instant.append(kind in SHOWS_AT_ITS_INSTANT)
        self.subject = None
        return index

    def ranked(self, kind: str, options: list[str], addresses: Addresses | None) -> list[str]:
        first = self.guide.choose(kind, options, addresses)
        return [first, *(o for o in self.reference_order.order(kind, options) if o != first)]

    def about(self, instance: str, message: dict[str, object]) -> None:
        subject = message.get("dialog") or message.get("session") or message.get("receive")
        self.subject = None if subject is None else str(subject)
        self.guide.about(instance, message)

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        fixed = kind in READINGS and not self.open_readings
        if len(options) < 2 or OPEN_WITHOUT.get(kind) in self.capabilities or fixed:  # not a point of the tree
            return self.reference_order.choose(kind, options, addresses)
        if kind in OPEN_WITH:  # it shows at once, where it shows at all: what the implementation reported decides
            if OPEN_WITH[kind] not in self.capabilities:
                return self.reference_order.choose(kind, options, addresses)
            reported = self.guide.reported(kind, options) if self.follow_reported else None
            if reported is not None:
                return reported
        ranked = self.ranked(kind, options, addresses)
        return ranked[self.take(len(ranked), reading=kind in READINGS, kind=kind)]

    def order(self, kind: str, options: list[str]) -> list[str]:
        """An order is picked by its first option; the rest follow in the reference's order."""
        if len(options) < 2:
            return list(options)
        ranked = self.ranked(kind, options, None)
        first = ranked[self.take(len(ranked), kind=kind)]
        return [first, *(o for o in self.reference_order.order(kind, options) if o != first)]


@dataclass
class Verdict:
    """What the search found: no violations when a branch agreed; else the furthest branch's difference."""

    violations: list[Violation]
    expected: Trace
    branches: int
    undecided: bool = False
    picks: list[int] = field(default_factory=list)


@dataclass
class _Ran:
    """One branch run: its first difference and the last instant a pick could have changed it."""

    found: list[Violation]
    reference: ReferenceImplementation
    expected: Trace
    branch: Branch
    latest: int | None = None
    # what the events that differ at that instant are about; None when one is about no message or session
    subjects: frozenset[str] | None = None


def _run(
    world: StageWorld,
    trace: Trace,
    params: dict[str, Any],
    capabilities: frozenset[str],
    picks: list[int],
    readings: bool = True,
) -> _Ran:
    """One branch beside the trace, to its first difference (its picks replayed, then the guide's)."""
    branch = Branch(picks, FollowingChooser(trace.events()), capabilities, readings)
    # the way of connecting is a reading of the whole run too: without READINGS open, the suite's reference's
    broker = CONNECTING_CHOICES[branch.take(len(CONNECTING_CHOICES), reading=True) if readings else 0]
    reference = ReferenceImplementation(broker_class=broker, params=reference_params(params), chooser=branch)
    branch.now = lambda: reference.broker.clock.now_ms if reference.broker is not None else -1
    expected = Trace(world.seed)
    carried = Carried()
    for index, (op, got) in enumerate(zip(world.script, trace.steps, strict=True)):
        expected.steps.append(execute(op, reference))
        found, differing = difference(index, got, expected.steps[-1], capabilities, carried)
        if found:
            if not differing:
                return _Ran(found, reference, expected, branch, int(op["at_ms"]))
            instant = min(int(e["at_ms"]) for e in differing)
            subjects = {_subject(e) for e in differing if int(e["at_ms"]) == instant}
            relevant = None if None in subjects else frozenset(str(s) for s in subjects)
            return _Ran(found, reference, expected, branch, instant, relevant)
    return _Ran([], reference, expected, branch)


def search(
    world: StageWorld,
    trace: Trace,
    params: dict[str, Any],
    capabilities: frozenset[str] = ALL,
    budget: int | None = None,
    readings: bool = True,
) -> Verdict:
    """The first branch of allowed picks that agrees with TRACE, fewest departures first, or the furthest difference."""
    budget = BUDGET if budget is None else budget
    # best first: the branches with the fewest picks against the guide at one message or session, the readings of
    # the whole run free (a few, and each changes much); among equals the latest pushed, as depth first would
    frontier: list[tuple[int, int, list[int]]] = [(0, 0, [])]
    furthest: _Ran | None = None
    branches = pushed = 0
    steps_left = budget * max(1, len(world.script))
    while frontier and steps_left > 0:
        cost, _, picks = heapq.heappop(frontier)
        branches += 1
        ran = _run(world, trace, params, capabilities, picks, readings)
        steps_left -= len(ran.expected.steps)
        branch = ran.branch
        if not ran.found:
            return Verdict([], ran.expected, branches, picks=branch.taken)
        if furthest is None or _further(ran, furthest):
            furthest = ran
        # the picks this branch made beyond those it replayed, up to the instant that differs, each with its untried
        # options; the latest on top
        latest = ran.latest if ran.latest is not None else -1
        for point in range(len(picks), len(branch.taken)):
            if branch.times[point] > latest:
                break
            if branch.at_its_instant[point] and branch.times[point] < latest:
                continue  # its other option would have shown at its instant, where this branch agreed
            about = branch.subjects[point]
            at_the_instant = branch.times[point] == latest and ran.subjects is not None
            if at_the_instant and about is not None and about not in (ran.subjects or ()):
                continue
            against = cost + (0 if branch.readings[point] else 1)
            for other in range(branch.widths[point] - 1, branch.taken[point], -1):
                pushed += 1
                heapq.heappush(frontier, (against, -pushed, [*branch.taken[:point], other]))
    assert furthest is not None
    expected = furthest.expected
    expected.steps += [execute(op, furthest.reference) for op in world.script[len(expected.steps) :]]
    return Verdict(furthest.found, expected, branches, undecided=bool(frontier), picks=furthest.branch.taken)


def histories(
    world: StageWorld,
    trace: Trace,
    params: dict[str, Any],
    capabilities: frozenset[str] = ALL,
    most: int = 256,
) -> list[Trace] | None:
    """Every history the documents allow for WORLD: the reference run whole on each branch of its open choices
    (the readings of a whole run too, and the picks that show at once, which the search takes as TRACE reported
    them), TRACE ordering each point's options; None when there are more than MOST. A reproducer's log table
    allows each of them (``stage.reproduce``)."""
    frontier: list[list[int]] = [[]]
    found: list[Trace] = []
    while frontier:
        if len(found) == most:
            return None
        picks = frontier.pop()
        branch = Branch(picks, FollowingChooser(trace.events()), capabilities, follow_reported=False)
        broker = CONNECTING_CHOICES[branch.take(len(CONNECTING_CHOICES), reading=True)]
        reference = ReferenceImplementation(broker_class=broker, params=reference_params(params), chooser=branch)
        found.append(Trace(world.seed, [execute(op, reference) for op in world.script]))
        for point in range(len(picks), len(branch.taken)):
            frontier += [
                [*branch.taken[:point], other] for other in range(branch.widths[point]) if other != branch.taken[point]
            ]
    return found


def _subject(event: dict[str, Any]) -> object:
    return event.get("dialog") or event.get("session")


def _further(ran: _Ran, than: _Ran) -> bool:
    """Did RAN agree longer: to a later step, or in the same step to a later instant?"""
    return (ran.found[0].at_step, ran.latest or 0) > (than.found[0].at_step, than.latest or 0)
