"""Builds the broker's objects from a topology in the contract's form (sbtck/topology.py, decoded where it entered).

The harness has already checked the topology and names every problem; what
is refused here are only contradictions a hand-made command could still hold.
"""

from __future__ import annotations

from sbtck import topology as declared
from sbtck.contract import QueueRef
from sbtck.engine.model import Activation, Database, Instance, Queue, ReaderBehaviour, Route, Service
from sbtck.errors import TopologyRefused


def _behaviour(spec: declared.Procedure) -> ReaderBehaviour:
    return ReaderBehaviour(spec.name, spec.receives, spec.receive_top, spec.waitfor_ms, spec.work_ms)


def _activation(spec: declared.Activation) -> Activation:
    return Activation(
        status=spec.status == "ON", procedure_name=spec.procedure_name, max_queue_readers=spec.max_queue_readers
    )


def route(spec: declared.Route, now_ms: int) -> Route:
    lifetime = spec.lifetime_s
    broker = spec.broker_instance
    return Route(
        name=spec.name,
        service_name=spec.service_name,
        broker_instance=broker.upper() if broker else None,
        address=spec.address,
        mirror_address=spec.mirror_address,
        expires_ms=None if lifetime is None else now_ms + int(lifetime * 1000),
    )


def build(topology: declared.Topology, start_ms: int = 0) -> dict[str, Instance]:
    instances: dict[str, Instance] = {}
    next_database_id = 5  # ids 1-4 belong to the system databases
    next_object_id = 1_000
    for ispec in topology.instances:
        instance = Instance(ispec.name, ispec.address, forwarding=ispec.message_forwarding, cpus=ispec.cpus)
        instance.msdb_routes = {r.name: route(r, start_ms) for r in ispec.msdb_routes}
        if instance.name in instances:
            raise TopologyRefused(f"instance {instance.name!r} is declared twice")
        instances[instance.name] = instance
        for dspec in ispec.databases:
            db = Database(
                dspec.name,
                next_database_id,
                dspec.broker_instance.upper(),
                mirroring_role=dspec.mirroring_role,
                master_key=dspec.master_key,
            )
            db.routes = {r.name: route(r, start_ms) for r in dspec.routes}
            next_database_id += 1
            instance.databases[db.name] = db
            for pspec in dspec.procedures:
                db.procedures[pspec.name] = _behaviour(pspec)
            for qspec in dspec.queues:
                key = QueueRef(instance.name, db.name, qspec.name)
                db.queues[key.queue] = Queue(key, next_object_id, db.database_id, _activation(qspec.activation))
                next_object_id += 1
            for sspec in dspec.services:
                if sspec.queue not in db.queues:
                    raise TopologyRefused(f"service {sspec.name!r} names unknown queue {sspec.queue!r}")
                db.services[sspec.name] = Service(sspec.name, QueueRef(instance.name, db.name, sspec.queue))
            for nspec in dspec.event_notifications:
                queue = db.queues.get(nspec.queue)
                if queue is None:
                    raise TopologyRefused(f"event notification {nspec.name!r} names unknown queue {nspec.queue!r}")
                queue.notifications.append(nspec.name)
    return instances
