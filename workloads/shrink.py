"""Delta debugging of a failing world: conversations, then operations, then topology elements, then time steps.

Design note
-----------
The shrinker turns a world of thousands of operations into a reproducer a
person can read. It treats the implementation as a black box: the only
question it may ask is ``test(world)``, "does this smaller world still fail
the same way?", and every answer costs a full run on both sides. What it
keeps true, whatever it removes:

1. **Same failure.** A candidate is kept only if ``test`` holds: the rule the
   shrinker was asked to keep is still broken (by the invariants or the
   differential check). Another rule breaking instead does not count, so the
   reproducer is tagged with the rule it really shows.
2. **A world the kit can state.** Every candidate is still a world of the
   generator's form: its first command starts the topology, time only moves
   forward, and only by ``advance_time`` (``_explicit`` puts one back where a
   dropped operation left a jump), so the reproducer can say it in steps.
   Removing a queue removes its services and notifications with it, and
   removing a conversation every command that names it; a command left naming
   what is gone is refused by both sides and dropped at the end (6).
3. **Monotone progress.** A pass only ever replaces the world with a strictly
   smaller candidate (fewer conversations, operations, elements or
   milliseconds); the outer loop stops when a whole round of passes changed
   none of (operations, elements, last instant), so it ends without a budget.
4. **Bounded cost.** Every ``test`` call spends one unit of ``budget``;
   ``ddmin`` and the time pass stop when it is gone, and the best world so
   far is returned, never a half-applied cut.
5. **Coarse before fine.** The shortest failing prefix goes first (a check
   that finds the break stops there, so a failing try costs only its
   prefix), then whole conversations (each takes many operations with it),
   then single operations by ddmin's halving, then topology, then time: the
   early passes make the later ones cheap. The checker remembers the verdict
   of each world it has seen, so a candidate met again costs nothing.
6. **No refused noise.** ``_tidy`` finally drops commands both sides refuse:
   a reproducer's every step must be taken by the reference engine, or it
   would fail on the reference for the wrong reason.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sbtck.workloads.generate import WAITING_VIEWS, StageWorld

Test = Callable[[StageWorld], bool]
Op = dict[str, Any]


@dataclass
class Shrunk:
    world: StageWorld
    tests: int
    seconds: float
    # the time budget ran out first: the world is the smallest failing one found by then
    out_of_time: bool = False


def ddmin(items: list[Any], test: Callable[[list[Any]], bool], budget: list[int]) -> list[Any]:
    """Zeller's ddmin, complements only: the smallest list found by removing chunks while test stays true."""
    n = 2
    while len(items) >= 2 and budget[0] > 0:
        size = max(1, len(items) // n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for index in range(len(chunks)):
            rest = [x for j, chunk in enumerate(chunks) if j != index for x in chunk]
            budget[0] -= 1
            if test(rest):
                items, n = rest, max(n - 1, 2)
                break
            if budget[0] <= 0:
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    if len(items) == 1 and budget[0] > 0:
        budget[0] -= 1
        if test([]):
            return []
    return items


def _with_script(world: StageWorld, script: list[Op]) -> StageWorld:
    return replace(world, script=_explicit(script), topology=script[0]["topology"])


def _explicit(script: list[Op]) -> list[Op]:
    """Time moves only by advance_time, as in a scenario: one is put back where an operation dropped left a jump."""
    out: list[Op] = []
    now = script[0]["at_ms"]
    for op in script:
        if op["at_ms"] > now and op["kind"] != "advance_time":
            out.append({"kind": "advance_time", "at_ms": op["at_ms"]})
        now = max(now, op["at_ms"])
        out.append(op)
    return out


def _body(world: StageWorld) -> tuple[Op, list[Op], list[Op]]:
    """The start, the operations a shrinker may drop, and the closing queries of the waiting views."""
    start, *rest = world.script
    tail = [op for op in rest if op["kind"] == "query_view" and op["view"] in WAITING_VIEWS]
    return start, [op for op in rest if op not in tail], tail


def _retime(start: Op, ops: list[Op], tail: list[Op]) -> list[Op]:
    """The closing queries at the time of the last operation kept, as a reproducer's Then steps run them."""
    end = max((op["at_ms"] for op in ops), default=start["at_ms"])
    return [{**op, "at_ms": end} for op in tail]


def _prefix(world: StageWorld, test: Test, budget: list[int]) -> StageWorld:
    """The shortest beginning of the world that still fails, found by halving.

    The largest cut first: a long world usually breaks its rule early, and a
    check that finds the break stops there, so each try costs its prefix only.
    """
    start, body, tail = _body(world)

    def script(n: int) -> list[Op]:
        return [start, *body[:n], *_retime(start, body[:n], tail)]

    low, high = 0, len(body)  # the whole body fails; high only ever moves to a length seen failing
    while low < high and budget[0] > 0:
        middle = (low + high) // 2
        budget[0] -= 1
        if test(_with_script(world, script(middle))):
            high = middle
        else:
            low = middle + 1
    return world if high == len(body) else _with_script(world, script(high))


def _conversations(world: StageWorld, test: Test, budget: list[int]) -> StageWorld:
    start, body, tail = _body(world)
    dialogs = sorted({op["dialog"] for op in body if op["kind"] == "begin_dialog"})

    def keep(chosen: list[str]) -> list[Op]:
        dropped = set(dialogs) - set(chosen)
        return [op for op in body if op.get("dialog") not in dropped and op.get("where_dialog") not in dropped]

    def script(chosen: list[str]) -> list[Op]:
        ops = keep(chosen)
        return [start, *ops, *_retime(start, ops, tail)]

    kept = ddmin(dialogs, lambda chosen: test(_with_script(world, script(chosen))), budget)
    return _with_script(world, script(kept))


def _operations(world: StageWorld, test: Test, budget: list[int]) -> StageWorld:
    start, body, tail = _body(world)

    def script(ops: list[Op]) -> list[Op]:
        return [start, *ops, *_retime(start, ops, tail)]

    kept = ddmin(body, lambda ops: test(_with_script(world, script(ops))), budget)
    return _with_script(world, script(kept))


def _elements(topology: dict[str, Any]) -> list[tuple[str, ...]]:
    """Paths of what may go: routes, notifications, queues with their services, databases, instances."""
    found: list[tuple[str, ...]] = []
    for i in topology["instances"]:
        found += [("msdb_route", i["name"], r["name"]) for r in i["msdb_routes"]]
        for d in i["databases"]:
            found += [("route", i["name"], d["name"], r["name"]) for r in d["routes"]]
            found += [("procedure", i["name"], d["name"], p["name"]) for p in d["procedures"]]
            found += [("notification", i["name"], d["name"], n["name"]) for n in d["event_notifications"]]
            found += [("queue", i["name"], d["name"], q["name"]) for q in d["queues"] if q["name"] != "InitiatorQueue"]
            found += [("database", i["name"], d["name"])] if i["name"] != "sql1" else []
        found += [("instance", i["name"])] if i["name"] != "sql1" else []
    return found


def _without(topology: dict[str, Any], gone: set[tuple[str, ...]]) -> dict[str, Any]:
    out = copy.deepcopy(topology)
    out["instances"] = [i for i in out["instances"] if ("instance", i["name"]) not in gone]
    for i in out["instances"]:
        i["msdb_routes"] = [r for r in i["msdb_routes"] if ("msdb_route", i["name"], r["name"]) not in gone]
        i["databases"] = [d for d in i["databases"] if ("database", i["name"], d["name"]) not in gone]
        for d in i["databases"]:
            where = (i["name"], d["name"])
            d["routes"] = [r for r in d["routes"] if ("route", *where, r["name"]) not in gone]
            d["procedures"] = [p for p in d["procedures"] if ("procedure", *where, p["name"]) not in gone]
            d["event_notifications"] = [
                n for n in d["event_notifications"] if ("notification", *where, n["name"]) not in gone
            ]
            queues = {q["name"] for q in d["queues"] if ("queue", *where, q["name"]) not in gone}
            d["queues"] = [q for q in d["queues"] if q["name"] in queues]
            d["services"] = [s for s in d["services"] if s["queue"] in queues]
            d["event_notifications"] = [n for n in d["event_notifications"] if n["queue"] in queues]
    return out


def _topology(world: StageWorld, test: Test, budget: list[int]) -> StageWorld:
    start, *rest = world.script
    elements = _elements(world.topology)

    def script(kept: list[tuple[str, ...]]) -> list[Op]:
        gone = set(elements) - set(kept)
        return [{**start, "topology": _without(start["topology"], gone)}, *rest]

    kept = ddmin(elements, lambda chosen: test(_with_script(world, script(chosen))), budget)
    return _with_script(world, script(kept))


def _time(world: StageWorld, test: Test, budget: list[int]) -> StageWorld:
    """Each gap between two instants, made as short as the failure allows: none, then halved."""
    script = world.script
    index = 1
    while index < len(script) and budget[0] > 0:
        gap = script[index]["at_ms"] - script[index - 1]["at_ms"]
        for shorter in sorted({0, (gap // 2000) * 1000}):
            if shorter >= gap or budget[0] <= 0:
                continue
            cut = gap - shorter
            candidate = script[:index] + [{**op, "at_ms": op["at_ms"] - cut} for op in script[index:]]
            budget[0] -= 1
            if test(_with_script(world, candidate)):
                script = candidate
                break
        else:
            index += 1
    return _with_script(world, script)


PASSES = (_prefix, _conversations, _operations, _topology, _time)


def _tidy(world: StageWorld, refused: Callable[[StageWorld], list[int]], tidy: Test, budget: list[int]) -> StageWorld:
    """Drops the commands both sides refuse: a reproducer's steps must all be taken by the reference."""
    for _ in range(len(world.script)):
        junk = refused(world)
        if not junk or budget[0] <= 0:
            break
        budget[0] -= 1
        candidate = _with_script(world, [op for i, op in enumerate(world.script) if i not in junk])
        if tidy(candidate):
            return candidate
        world = _with_script(world, [op for i, op in enumerate(world.script) if i != junk[0]])
    return world


def shrink(
    world: StageWorld,
    test: Test,
    max_tests: int = 3000,
    refused: Callable[[StageWorld], list[int]] | None = None,
    tidy: Test | None = None,
    budget_s: float | None = None,
    tried: Callable[[], None] | None = None,
) -> Shrunk:
    """Runs every pass until none makes the world smaller (or the budget of test runs, or of BUDGET_S seconds, is
    spent). TRIED is called before every run of the world, so that a progress line can move while it shrinks."""
    began = time.monotonic()
    budget = [max_tests]
    spent_when_late: list[int] = []  # the tests run when the time budget ran out, if it did

    def timed(run: Callable[[StageWorld], Any], nothing: Any) -> Callable[[StageWorld], Any]:
        # a candidate after the deadline is not run: taken as not failing, the passes keep the world they have, and
        # the spent budget ends them (an implementation slow to answer could otherwise hold one world for hours)
        def within(candidate: StageWorld) -> Any:
            if budget_s is not None and time.monotonic() - began > budget_s:
                if not spent_when_late:
                    spent_when_late.append(max_tests - budget[0])
                budget[0] = 0
                return nothing
            if tried is not None:
                tried()
            return run(candidate)

        return within

    test = timed(test, False)
    if refused is not None and tidy is not None:
        refused, tidy = timed(refused, []), timed(tidy, False)
    size = None
    while budget[0] > 0:
        for shrink_pass in PASSES:
            world = shrink_pass(world, test, budget)
        now = (len(world.script), len(_elements(world.topology)), world.script[-1]["at_ms"])
        if now == size:
            break
        size = now
    if refused is not None and tidy is not None:
        world = _tidy(world, refused, tidy, budget)
    late = bool(spent_when_late)
    return Shrunk(world, spent_when_late[0] if late else max_tests - budget[0], time.monotonic() - began, late)
