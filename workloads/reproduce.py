"""A shrunk world written as a .feature in the project's own step vocabulary.

Every contract command the generator writes has one step here; the two
Then steps re-check the trace the scenario recorded, so the file fails on
the implementation that failed and passes on the reference engine.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from sbtck.errors import DeclarationError, NoStepFor
from sbtck.workloads.generate import WAITING_VIEWS, World

THEN = (
    "    Then no invariant of the workload stage is broken\n"
    "    And the reference engine, making the same allowed choices, gives the same outcome\n"
)


def topology_yaml(plain: dict[str, Any]) -> str:
    """The contract's plain topology in the mapping form topology files use."""
    instances: dict[str, Any] = {}
    for i in plain["instances"]:
        databases: dict[str, Any] = {}
        for d in i["databases"]:
            db: dict[str, Any] = {"broker_instance": d["broker_instance"]}
            if d["procedures"]:
                db["procedures"] = {p["name"]: _procedure(p) for p in d["procedures"]}
            db["queues"] = {q["name"]: {"activation": _activation(q["activation"])} for q in d["queues"]}
            db["services"] = {s["name"]: {"queue": s["queue"]} for s in d["services"]}
            if d["event_notifications"]:
                db["event_notifications"] = {n["name"]: {"queue": n["queue"]} for n in d["event_notifications"]}
            if d["mirroring_role"]:
                db["mirroring_role"] = d["mirroring_role"]
            if not d["master_key"]:
                db["master_key"] = False
            db.update(_routes(d["routes"], "routes"))
            databases[d["name"]] = db
        spec: dict[str, Any] = {"address": i["address"], "cpus": i["cpus"]}
        if i["message_forwarding"]:
            spec["message_forwarding"] = "ON"
        spec.update(_routes(i["msdb_routes"], "msdb_routes"))
        spec["databases"] = databases
        instances[i["name"]] = spec
    return yaml.safe_dump({"instances": instances}, sort_keys=False, width=200)


def writable(plain: dict[str, Any]) -> bool:
    """Would a topology file with this content pass the kit's checks?"""
    from sbtck.fixtures.topology import parse

    try:
        parse(topology_yaml(plain), "a shrunk world")
    except DeclarationError:
        return False
    return True


def _procedure(p: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"receives": p["receives"], "receive_top": p["receive_top"]}
    if p["waitfor_ms"] is not None:
        out["waitfor_s"] = p["waitfor_ms"] / 1000
    if p["work_ms"]:
        out["work_s"] = p["work_ms"] / 1000
    return out


def _activation(a: dict[str, Any]) -> dict[str, Any]:
    out = {"status": a["status"], "max_queue_readers": a["max_queue_readers"]}
    if a["procedure_name"] is not None:
        out["procedure_name"] = a["procedure_name"]
    return out


def _routes(routes: list[dict[str, Any]], key: str) -> dict[str, Any]:
    auto = [r for r in routes if r["name"] == "AutoCreatedLocal" and r["address"] == "LOCAL" and not r["service_name"]]
    out: dict[str, Any] = {} if auto else {"auto_created_local": False}
    declared = {}
    for r in routes:
        if r in auto:
            continue
        spec = {
            k: r[k]
            for k in ("service_name", "broker_instance", "address", "mirror_address", "lifetime_s")
            if r.get(k) is not None
        }
        declared[r["name"]] = spec
    if declared:
        out[key] = declared
    return out


def _wait(ms: int | None) -> str:
    return "" if ms is None else f" waiting up to {ms / 1000:g} seconds"


def _options(route: dict[str, Any]) -> str:
    parts = []
    for key, option in (
        ("service_name", "SERVICE_NAME"),
        ("broker_instance", "BROKER_INSTANCE"),
        ("address", "ADDRESS"),
        ("mirror_address", "MIRROR_ADDRESS"),
    ):
        if route.get(key) is not None:
            parts.append(f"{option} = '{route[key]}'")
    if route.get("lifetime_s") is not None:
        parts.append(f"LIFETIME = {route['lifetime_s']:g}")
    return ", ".join(parts)


def _table(op: dict[str, Any]) -> str:
    return f'database "{op["database"]}" of "{op["instance"]}"' if op["database"] else f'msdb of "{op["instance"]}"'


# commands whose step is their fields put into a sentence
TEMPLATES = {
    "begin_transaction": 'session "{session}" begins a transaction',
    "commit": 'session "{session}" commits',
    "rollback": 'session "{session}" rolls back',
    "create_event_notification": 'CREATE EVENT NOTIFICATION "{name}" ON QUEUE "{queue[queue]}" FOR QUEUE_ACTIVATION',
    "drop_event_notification": 'DROP EVENT NOTIFICATION "{name}" ON QUEUE "{queue[queue]}"',
    "drop_connection": 'the connection from "{instance}" to "{address}" drops',
    "failover": 'the copy of database "{database}" on "{instance}" becomes the principal',
    "create_master_key": 'CREATE MASTER KEY in database "{database}" on "{instance}"',
    "drop_route": "in {table}: DROP ROUTE {name}",
}


def _sentence(op: dict[str, Any], start_ms: int) -> str:
    kind = op["kind"]
    if kind == "advance_time":
        return f"time passes to second {(op['at_ms'] - start_ms) / 1000:g}"
    if kind == "begin_dialog":
        text = f'dialog "{op["dialog"]}" is begun from service "{op["from_service"]}" to service "{op["to_service"]}"'
        return text + (f" on the broker instance of {op['to_broker_instance']}" if op["to_broker_instance"] else "")
    if kind == "send":
        return f'a {"reply" if op["from_target"] else "message"} is sent on dialog "{op["dialog"]}"'
    if kind in ("receive", "get_conversation_group"):
        return _receive(op)
    if kind == "alter_queue":
        options = [f"STATUS = {op['status']}"] if op["status"] else []
        options += [] if op["max_queue_readers"] is None else [f"MAX_QUEUE_READERS = {op['max_queue_readers']}"]
        return f'ALTER QUEUE "{op["queue"]["queue"]}" WITH ACTIVATION ({", ".join(options)})'
    if kind == "set_reachable":
        return f'instance "{op["instance"]}" {"can be reached again" if op["reachable"] else "cannot be reached"}'
    if kind == "set_message_forwarding":
        return f'message forwarding is {"enabled" if op["active"] else "disabled"} on "{op["instance"]}"'
    if kind == "lose_in_transit" and not op["from_target"]:
        return f'the network loses message {op["sequence"]} of dialog "{op["dialog"]}"'
    if kind == "fail_transmission":
        why = "for lack of memory" if op["reason"] == "resource" else "security validation"
        return f'the transmission of dialog "{op["dialog"]}" fails {why}'
    if kind == "fail_task_handlers":
        n = op["count"]
        return f'{n} task handler{"s" if n != 1 else ""} of "{op["instance"]}" fail{"" if n != 1 else "s"}'
    if kind == "set_dispatcher_saving":
        return _dispatcher(op)
    if kind in ("create_route", "alter_route", "answer_routing_request"):
        return _route_step(op)
    raise NoStepFor(f"no step in the vocabulary writes a {kind!r} command: {op}")


def _receive(op: dict[str, Any]) -> str:
    who, queue, wait = f'session "{op["session"]}"', f'"{op["queue"]["queue"]}"', _wait(op["waitfor_ms"])
    if op["kind"] == "get_conversation_group":
        return f"{who} gets a conversation group from queue {queue}{wait}"
    top = "" if op["top"] is None else f"top {op['top']} "
    where = "" if op["where_dialog"] is None else f' where the dialog is "{op["where_dialog"]}"'
    return f"{who} receives {top}from queue {queue}{where}{wait}"


def _dispatcher(op: dict[str, Any]) -> str:
    if op["mode"] == "stopped":
        return f'the dispatcher of "{op["instance"]}" stops saving messages'
    if not op["delay_s"]:
        return f'the dispatcher of "{op["instance"]}" saves messages again'
    return f'the dispatcher of "{op["instance"]}" saves each message {op["delay_s"]:g} seconds after it arrives'


def _route_step(op: dict[str, Any]) -> str:
    route = op["route"]
    if op["kind"] == "answer_routing_request":
        where = f'for service "{route["service_name"]}" in {_table(op)}'
        return f"the dynamic routing service answers {where} with ADDRESS = {route['address']}"
    verb = "CREATE" if op["kind"] == "create_route" else "ALTER"
    return f"in {_table(op)}: {verb} ROUTE {route['name']} WITH {_options(route)}"


def step(op: dict[str, Any], start_ms: int) -> str | None:
    """The step that runs this command, or None for one the Then steps run themselves."""
    if op["kind"] == "query_view" and op["view"] in WAITING_VIEWS:
        return None
    template = TEMPLATES.get(op["kind"])
    if template is not None:
        return template.format(table=_table(op) if "instance" in op and "database" in op else "", **op)
    return _sentence(op, start_ms)


def feature(world: World, rules: list[str], implementation: str, found_by: str) -> str:
    """A feature with one scenario: the shrunk world, tagged with the rules it breaks."""
    start = world.start_ms
    steps = [s for s in (step(op, start) for op in world.script[1:]) if s is not None]
    if not steps:
        steps = ["time passes to second 0"]
    *given, last = steps
    topology = textwrap.indent(topology_yaml(world.topology), " " * 6)
    lines = [f"@workload {' '.join('@' + r for r in rules)}".rstrip()]
    lines.append(f"Feature: Workload world {world.seed}, shrunk")
    lines.append("")
    lines.append(f"  Found by the workload stage ({found_by}) against {implementation}:")
    lines.append(f"  world {world.seed} of generator version {world.version}, shrunk to {len(steps)} steps.")
    lines.append("")
    lines.append(f"  Scenario: [1] World {world.seed} breaks {', '.join(rules)}")
    lines.append("    Given the topology:")
    lines.append('      """')
    lines.extend(topology.rstrip("\n").split("\n"))
    lines.append('      """')
    lines.extend(f"    And {s}" for s in given)
    lines.append(f"    When {last}")
    return "\n".join(lines) + "\n" + THEN
