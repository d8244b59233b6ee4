"""Builds the broker's objects from a topology in the contract's plain form.

The harness has already checked the topology and names every problem; what
is refused here are only contradictions a hand-made command could still hold.
"""

from __future__ import annotations

from typing import Any

from sbtck.contract import TOPOLOGY_DEFAULTS, QueueRef
from sbtck.engine.model import Activation, Database, Instance, Queue, ReaderBehaviour, Route, Service
from sbtck.errors import TopologyRefused


def _behaviour(spec: dict[str, Any]) -> ReaderBehaviour:
    return ReaderBehaviour(
        name=spec["name"],
        receives=bool(spec.get("receives", TOPOLOGY_DEFAULTS.receives)),
        receive_top=spec.get("receive_top", TOPOLOGY_DEFAULTS.receive_top),
        waitfor_ms=spec.get("waitfor_ms"),
        work_ms=int(spec.get("work_ms", TOPOLOGY_DEFAULTS.work_s * 1000)),
    )


def _activation(spec: dict[str, Any] | None) -> Activation:
    spec = spec or {}
    return Activation(
        status=spec.get("status", TOPOLOGY_DEFAULTS.activation_status) == "ON",
        procedure_name=spec.get("procedure_name"),
        max_queue_readers=int(spec.get("max_queue_readers", TOPOLOGY_DEFAULTS.max_queue_readers)),
    )


def route(spec: dict[str, Any], now_ms: int) -> Route:
    lifetime = spec.get("lifetime_s")
    broker = spec.get("broker_instance")
    return Route(
        name=spec["name"],
        service_name=spec.get("service_name"),
        broker_instance=broker.upper() if broker else None,
        address=spec.get("address", TOPOLOGY_DEFAULTS.route_address),
        mirror_address=spec.get("mirror_address"),
        expires_ms=None if lifetime is None else now_ms + int(lifetime * 1000),
    )


def build(topology: dict[str, Any], start_ms: int = 0) -> dict[str, Instance]:
    instances: dict[str, Instance] = {}
    next_database_id = 5  # ids 1-4 belong to the system databases
    next_object_id = 1_000
    for ispec in topology.get("instances", []):
        instance = Instance(
            ispec["name"],
            ispec.get("address", TOPOLOGY_DEFAULTS.address(ispec["name"])),
            forwarding=bool(ispec.get("message_forwarding", TOPOLOGY_DEFAULTS.message_forwarding)),
            cpus=int(ispec.get("cpus", TOPOLOGY_DEFAULTS.cpus)),
        )
        instance.msdb_routes = {r["name"]: route(r, start_ms) for r in ispec.get("msdb_routes", [])}
        if instance.name in instances:
            raise TopologyRefused(f"instance {instance.name!r} is declared twice")
        instances[instance.name] = instance
        for dspec in ispec.get("databases", []):
            db = Database(
                dspec["name"],
                next_database_id,
                str(dspec.get("broker_instance", "")).upper(),
                mirroring_role=dspec.get("mirroring_role"),
                master_key=bool(dspec.get("master_key", TOPOLOGY_DEFAULTS.master_key)),
            )
            db.routes = {r["name"]: route(r, start_ms) for r in dspec.get("routes", [])}
            next_database_id += 1
            instance.databases[db.name] = db
            for pspec in dspec.get("procedures", []):
                db.procedures[pspec["name"]] = _behaviour(pspec)
            for qspec in dspec.get("queues", []):
                key = QueueRef(instance.name, db.name, qspec["name"])
                db.queues[key.queue] = Queue(key, next_object_id, db.database_id, _activation(qspec.get("activation")))
                next_object_id += 1
            for sspec in dspec.get("services", []):
                if sspec["queue"] not in db.queues:
                    raise TopologyRefused(f"service {sspec['name']!r} names unknown queue {sspec['queue']!r}")
                db.services[sspec["name"]] = Service(sspec["name"], QueueRef(instance.name, db.name, sspec["queue"]))
            for nspec in dspec.get("event_notifications", []):
                queue = db.queues.get(nspec["queue"])
                if queue is None:
                    raise TopologyRefused(
                        f"event notification {nspec['name']!r} names unknown queue {nspec['queue']!r}"
                    )
                queue.notifications.append(nspec["name"])
    return instances
