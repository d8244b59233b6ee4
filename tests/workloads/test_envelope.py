"""The generator's envelope: no world holds a situation whose outcome the documents leave undefined.

``sbtck.workloads.envelope.undefined`` reads each such situation from a
world alone; 10,000 worlds drawn by turns in every area hold none of them
(generation only, no implementation runs), a world made to hold one is
caught, and the shrinker never keeps a candidate that holds one.
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from sbtck.workloads.envelope import undefined
from sbtck.workloads.generate import AREAS, StageWorld, generate, needs
from sbtck.workloads.stage import Checker
from tests.fakes import partial

WORLDS = 10_000
# what only the periodic document defines: suppressing a destination after a disconnection or a failed
# connection (PER-2A), failing task handlers, lost messages and failed transmissions (reclassified, PER-2B), the
# dispatcher's buffers, master keys, the clean-up of acknowledged messages
PERIODIC_FAULTS = {
    "drop_connection",
    "set_reachable",
    "fail_task_handlers",
    "set_dispatcher_saving",
    "create_master_key",
    "lose_in_transit",
    "fail_transmission",
    "stop_ack_cleanup",
}


def test_no_world_of_ten_thousand_holds_a_situation_the_documents_leave_undefined() -> None:
    written: Counter[str] = Counter()
    for seed in range(WORLDS):
        world = generate(seed, 5, None, AREAS)
        assert undefined(world) == [], (seed, undefined(world))
        written.update(op["kind"] + ("/reply" if op.get("from_target") else "") for op in world.script)
        routes = [r for i in world.topology["instances"] for d in i["databases"] for r in d["routes"]]
        written["TRANSPORT route"] += sum(r["address"] == "TRANSPORT" for r in routes)
    # what is defined is still written: replies, dropped connections, TRANSPORT routes (RTC-4), master keys created
    # for the databases whose broker the periodic tasks start (PER-5C)
    assert written["send/reply"] > 1_000 and written["drop_connection"] > 0 and written["TRANSPORT route"] > 100
    assert written["create_master_key"] > 100


def _world(seed: int = 1) -> StageWorld:
    world = generate(seed)
    assert world.topology["instances"][0]["databases"][0]["master_key"]
    return world


def test_a_reply_before_its_target_received_anything_is_caught() -> None:
    world = _world()
    first = next(i for i, op in enumerate(world.script) if op["kind"] == "send")
    world.script.insert(first, {**world.script[first], "from_target": True})
    assert any("a reply before the target surely received anything" in u for u in undefined(world))


def test_a_send_from_a_database_whose_broker_never_started_is_caught() -> None:
    world = _world()
    world.topology = copy.deepcopy(world.topology)
    world.topology["instances"][0]["databases"][0]["master_key"] = False
    assert any("SEND from a database whose broker never started" in u for u in undefined(world))


def test_a_message_to_a_service_a_database_without_its_master_key_holds_is_caught() -> None:
    """No document says what becomes of a message for a database whose broker has not started: passed over as if
    its service were not there (the reference) or held until it starts; 9% of generator 8's worlds held one."""
    world = _world()
    world.topology = copy.deepcopy(world.topology)
    begin = next(op for op in world.script if op["kind"] == "begin_dialog")
    send = next(i for i, op in enumerate(world.script) if op["kind"] == "send" and op["dialog"] == begin["dialog"])
    assert undefined(world) == []
    holders = [
        d
        for i in world.topology["instances"]
        for d in i["databases"]
        for s in d["services"]
        if s["name"] == begin["to_service"]
    ]
    for db in holders:
        db["master_key"] = False
    assert f"command {send}: a message to a service a database whose broker may not start holds" in undefined(world)


def test_dropping_a_connection_that_may_not_exist_is_caught() -> None:
    world = _world()
    world.script.insert(1, {"kind": "drop_connection", "at_ms": world.start_ms, "instance": "sql1", "address": "x"})
    assert undefined(world) == ["command 1: dropping a connection that may not exist"]


def test_a_transport_route_for_a_service_that_names_no_address_is_caught() -> None:
    world = _world()
    world.topology = copy.deepcopy(world.topology)
    routes = world.topology["instances"][0]["databases"][0]["routes"]
    routes.append({**routes[0], "name": "Anything", "address": "TRANSPORT"})
    assert undefined(world) == ["route Anything: TRANSPORT for a service whose name is no address"]


def _mirrored_world() -> StageWorld:
    """The first world with a mirrored database (routing/06's pair: sqlp the principal, sqlm its mirror)."""
    return next(
        w
        for w in map(generate, range(200))
        if any(d.get("mirroring_role") for i in w.topology["instances"] for d in i["databases"])
    )


@pytest.mark.parametrize("copy_at", ["sqlp", "sqlm"])
def test_reading_a_copy_of_a_mirrored_database_is_caught(copy_at: str) -> None:
    world = _mirrored_world()
    queue = {"instance": copy_at, "database": "ledger", "queue": f"LedgerQueue{copy_at[-1]}"}
    world.script.insert(1, {"kind": "receive", "at_ms": world.start_ms, "session": "S1", "queue": queue, "top": None})
    assert undefined(world) == ["command 1: receive from a copy of a mirrored database"]


def test_altering_a_mirrored_route_to_its_own_mirror_address_is_caught() -> None:
    world = _mirrored_world()
    routes = world.topology["instances"][0]["databases"][0]["routes"]
    paired = next(r for r in routes if r["mirror_address"])
    route = {**paired, "address": paired["mirror_address"].lower(), "mirror_address": None}
    world.script.insert(
        1, {"kind": "alter_route", "at_ms": world.start_ms, "instance": "sql1", "database": "db", "route": route}
    )
    assert undefined(world) == [f"command 1: alter_route of {paired['name']} to its mirror address, naming no pair"]
    # to any other address it is defined: the route names a pair still
    world.script[1] = {**world.script[1], "route": {**route, "address": "TCP://sql2.example:4022"}}
    assert undefined(world) == []


def test_creating_what_exists_or_dropping_what_does_not_is_caught() -> None:
    world = _world()
    at = world.start_ms
    world.script.insert(1, {"kind": "drop_route", "at_ms": at, "instance": "sql1", "database": "db", "name": "Nowhere"})
    assert undefined(world) == ["command 1: drop_route of route Nowhere, which does not exist"]
    # a routing request answered twice for one service: its route exists, and a second CREATE ROUTE is refused
    answer = {"kind": "answer_routing_request", "at_ms": at, "instance": "sql1", "database": "db"}
    route = {"name": "Dynamic_X", "service_name": "X", "broker_instance": None, "address": "TCP://sql2.example:4022"}
    world.script[1:2] = [{**answer, "route": route}, {**answer, "route": route}]
    assert undefined(world) == ["command 2: answer_routing_request of route Dynamic_X, which exists"]
    world, instance, database, notification = next(
        (w, i["name"], d["name"], n)
        for w in map(generate, range(100))
        for i in w.topology["instances"]
        for d in i["databases"]
        for n in d["event_notifications"]
    )
    queue = {"instance": instance, "database": database, "queue": notification["queue"]}
    world.script.insert(
        1, {"kind": "create_event_notification", "at_ms": at, "name": notification["name"], "queue": queue}
    )
    assert f"command 1: create_event_notification of {notification['name']}, which exists" in undefined(world)


@pytest.mark.parametrize("capabilities", [partial.ROUTING, partial.ACTIVATION, partial.ROUTING + partial.ACTIVATION])
def test_without_periodic_tasks_no_fault_that_only_the_periodic_tasks_define(capabilities: tuple[str, ...]) -> None:
    """A broker that does not declare periodic_tasks meets no suppressed destination, no failing handlers, no
    lost message: they are the periodic document's."""
    for seed in range(WORLDS // 5):
        world = generate(seed, 5, capabilities)
        kinds = {op["kind"] for op in world.script}
        assert not kinds & PERIODIC_FAULTS, (seed, kinds & PERIODIC_FAULTS)
        assert "periodic_tasks" not in needs(world)


def test_the_shrinker_keeps_no_candidate_outside_the_envelope() -> None:
    """A candidate that still breaks the rule, but drops a connection that may not exist, is not kept."""
    checker = Checker(lambda: partial.black_box_variant("routing", "steps_2_and_3_swapped"), True)
    try:
        outcome = next(o for o in map(checker.check, range(300)) if o.outcome == "failed")
        world = checker.world(outcome.seed)
        assert checker.breaks(world, outcome.rules[0])
        fault = {"kind": "drop_connection", "at_ms": world.start_ms, "instance": "sql1", "address": "x"}
        candidate = StageWorld(world.seed, world.version, world.topology, [world.script[0], fault, *world.script[1:]])
        assert undefined(candidate) and not checker.breaks(candidate, outcome.rules[0])
    finally:
        checker.close()
