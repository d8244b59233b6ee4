"""What a world may hold: the situations whose outcome the documents define, read from the world alone.

The generator keeps out of the rest as it writes a script (generate.py);
``undefined`` says it again from the finished world, so that a shrinker's
candidate, which drops commands and shortens time, stays inside as well: a
reply whose first message no longer surely arrived, or a dropped
connection that may not exist any more, is no reproducer of anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sbtck.workloads.generate import ARRIVED_WITHIN_MS, CONNECTION_KEPT_MS, StageWorld

# faults that may hold a message of the instance, service or dialog they name; a route altered or dropped, any
HOLDING = frozenset(
    {
        "set_reachable",
        "set_dispatcher_saving",
        "fail_task_handlers",
        "drop_connection",
        "lose_in_transit",
        "fail_transmission",
        "create_route",
        "alter_route",
        "drop_route",
        "answer_routing_request",
    }
)


def undefined(world: StageWorld) -> list[str]:
    """Each command of WORLD in a situation the documents leave undefined, with why (none for a generated world)."""
    found = []
    instances = world.topology["instances"]
    for route in _routes(world):
        if route["address"].upper() == "TRANSPORT" and not str(route["service_name"]).upper().startswith("TCP://"):
            # the documents do not say where a TRANSPORT route leads; the reference would take the address NONE
            found.append(f"route {route['name']}: TRANSPORT for a service whose name is no address")
    keyed = {(i["name"], d["name"]): d["master_key"] for i in instances for d in i["databases"]}
    # what exists now: creating it again, or dropping what is not there, is refused by the reference alone
    notified = {
        (i["name"], d["name"], n["name"]) for i in instances for d in i["databases"] for n in d["event_notifications"]
    }
    routes = {(i["name"], d["name"], r["name"]) for i in instances for d in i["databases"] for r in d["routes"]}
    # the copies of a mirrored database: the documents say where its messages go (to the principal), but nothing of
    # sessions reading either copy's queue, nor whether a conversation group one copy's transaction holds is held
    # in the other after a failover (one conversation, two queues); a real mirror cannot even be read
    mirrored = {(i["name"], d["name"]) for i in instances for d in i["databases"] if d.get("mirroring_role")}
    # where a message may go: no document says what becomes of a message for a database whose broker has not
    # started (docs/implementing.md): passed over as if its service were not there, or held until it starts
    keyless_services = {
        s["name"] for i in instances for d in i["databases"] if not d["master_key"] for s in d["services"]
    }
    to_service: dict[str, str] = {}
    for index, op in enumerate(world.script):
        kind = op["kind"]
        if kind == "begin_dialog":
            to_service[op["dialog"]] = op["to_service"]
        if kind == "send" and not op["from_target"] and to_service.get(op["dialog"]) in keyless_services:
            found.append(f"command {index}: a message to a service a database whose broker may not start holds")
        if kind in ("create_event_notification", "drop_event_notification"):
            name = (op["queue"]["instance"], op["queue"]["database"], op["name"])
            if (name in notified) == (kind == "create_event_notification"):
                there = "exists" if name in notified else "does not exist"
                found.append(f"command {index}: {kind} of {op['name']}, which {there}")
            notified ^= {name}
        elif kind in ("drop_route", "alter_route", "create_route", "answer_routing_request"):
            name = (op["instance"], op["database"], op["name"] if kind == "drop_route" else op["route"]["name"])
            if kind in ("drop_route", "alter_route") and name not in routes:
                found.append(f"command {index}: {kind} of route {name[2]}, which does not exist")
            elif kind in ("create_route", "answer_routing_request") and name in routes:
                found.append(f"command {index}: {kind} of route {name[2]}, which exists")
            elif kind == "alter_route" and _own_mirror(world, name, op["route"]):
                found.append(f"command {index}: alter_route of {name[2]} to its mirror address, naming no pair")
            routes = routes - {name} if kind == "drop_route" else routes | {name}
        read = kind in ("receive", "get_conversation_group")
        if read and (op["queue"]["instance"], op["queue"]["database"]) in mirrored:
            found.append(f"command {index}: {kind} from a copy of a mirrored database")
        if kind == "send" and not op["from_target"] and not keyed.get(("sql1", "db"), True):
            found.append(f"command {index}: SEND from a database whose broker never started")
        elif kind == "send" and op["from_target"] and not _surely_arrived(world, op["dialog"], index):
            found.append(f"command {index}: a reply before the target surely received anything")
        elif kind == "drop_connection" and not _surely_connected(world, index):
            found.append(f"command {index}: dropping a connection that may not exist")
        elif kind in ("create_route", "alter_route", "answer_routing_request") and _transport(op["route"]):
            found.append(f"command {index}: a TRANSPORT route")
    return found


def _own_mirror(world: StageWorld, name: tuple[str, str, str], altered: dict[str, Any]) -> bool:
    """Would ALTERED make route NAME's address its mirror address (generate._pair_of_one)?"""
    instance = next(i for i in world.topology["instances"] if i["name"] == name[0])
    databases = instance["databases"] if name[1] is not None else []
    routes = [r for d in databases if d["name"] == name[1] for r in d["routes"] if r["name"] == name[2]]
    mirror = altered.get("mirror_address") or next((r["mirror_address"] for r in routes), None)
    address = altered.get("address") or next((r["address"] for r in routes), None)
    return mirror is not None and str(mirror).upper() == str(address).upper()


def _transport(route: dict[str, Any]) -> bool:
    return bool(str(route["address"]).upper() == "TRANSPORT")


def _routes(world: StageWorld) -> Iterator[dict[str, Any]]:
    for instance in world.topology["instances"]:
        yield from instance["msdb_routes"]
        for db in instance["databases"]:
            yield from db["routes"]


def _target(world: StageWorld, service: str) -> str | None:
    """The one instance sql1.db's routes send SERVICE to, whatever route is chosen; in one instance, sql1."""
    instances = world.topology["instances"]
    if len(instances) == 1:
        return "sql1"
    # matching's step 2: the routes naming the service and no broker instance, which pre-empt every later step
    routes = [r for r in instances[0]["databases"][0]["routes"] if r["service_name"] == service]
    routes = [r for r in routes if r["broker_instance"] is None]
    addresses = {r["address"] for r in routes}
    if len(addresses) != 1 or any(r["mirror_address"] or r["lifetime_s"] for r in routes):
        return None
    return next((i["name"] for i in instances if i["address"] in addresses), None)


def _holds(op: dict[str, Any], world: StageWorld, instance: str, service: str, dialog: str) -> bool:
    """May fault OP hold the first message of DIALOG, to SERVICE at INSTANCE?"""
    kind = op["kind"]
    if kind not in HOLDING:
        return False
    if kind in ("set_reachable", "set_dispatcher_saving", "fail_task_handlers"):
        return bool(op["instance"] in ("sql1", instance))
    if kind == "drop_connection":
        return bool(op["address"] == _address(world, instance))
    if kind in ("lose_in_transit", "fail_transmission"):
        return bool(op["dialog"] == dialog)
    if kind in ("create_route", "answer_routing_request"):
        return bool(op["route"]["service_name"] == service)
    return True


def _address(world: StageWorld, instance: str) -> str:
    return str(next(i["address"] for i in world.topology["instances"] if i["name"] == instance))


def _first_send(world: StageWorld, dialog: str) -> tuple[int, dict[str, Any]] | None:
    return next(
        (
            (i, op)
            for i, op in enumerate(world.script)
            if op["kind"] == "send" and op["dialog"] == dialog and not op["from_target"]
        ),
        None,
    )


def _to(world: StageWorld, dialog: str) -> tuple[str, str] | None:
    """The instance DIALOG's messages surely go to, and its service; None when no such instance is sure."""
    begin = next((op for op in world.script if op["kind"] == "begin_dialog" and op["dialog"] == dialog), None)
    if begin is None or begin["to_broker_instance"] is not None:
        return None
    service = str(begin["to_service"])
    instance = _target(world, service)
    if instance is None:
        return None
    databases = next(i for i in world.topology["instances"] if i["name"] == instance)["databases"]
    if not all(d["master_key"] for d in databases if any(s["name"] == service for s in d["services"])):
        return None  # a database whose broker never starts holds it: nothing says when the message arrives
    return instance, service


def _surely_arrived(world: StageWorld, dialog: str, until: int) -> bool:
    """Had DIALOG's first message surely reached its target by command UNTIL, whatever the documents leave open?"""
    to, first = _to(world, dialog), _first_send(world, dialog)
    if to is None or first is None or first[0] > until:
        return False
    instance, service = to
    start, send = first
    by = send["at_ms"] + (ARRIVED_WITHIN_MS if instance != "sql1" else 0)
    # a fault after it, in the same instant, comes too late to hold a message delivered at once
    window = [op for op in world.script[start + 1 : until] if op["at_ms"] < by]
    return bool(by <= world.script[until]["at_ms"]) and not any(
        _holds(op, world, instance, service, dialog) for op in window
    )


def _surely_connected(world: StageWorld, index: int) -> bool:
    """Had sql1 surely a connection to the address command INDEX drops, opened by a first message that surely
    arrived and used within the time a connection surely stays open, and not closed since?"""
    op = world.script[index]
    if op["instance"] != "sql1":
        return False
    for start in range(index - 1, 0, -1):
        send = world.script[start]
        if send["kind"] != "send" or send["from_target"]:
            continue
        if not op["at_ms"] - CONNECTION_KEPT_MS < send["at_ms"] <= op["at_ms"] - ARRIVED_WITHIN_MS:
            continue
        to = _to(world, send["dialog"])
        if to is None or _address(world, to[0]) != op["address"] or not _surely_arrived(world, send["dialog"], index):
            continue
        since = world.script[start:index]
        # nothing since has closed it: the instance out of reach, or the connection dropped already
        closed = any(
            (e["kind"] == "set_reachable" and e["instance"] == to[0])
            or (e["kind"] == "drop_connection" and e["address"] == op["address"])
            for e in since
        )
        return not closed
    return False
