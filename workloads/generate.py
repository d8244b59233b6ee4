"""A world is a pure function of (seed, generator version): a topology and a conversation script."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

GENERATOR_VERSION = 1
# where a message that has neither arrived nor been dropped must be, at the end of a world
WAITING_VIEWS = ("sys.transmission_queue", "sbtck.forwarder", "sbtck.dispatcher_buffers")
START_MS = 1_767_225_600_000
GUID = "00000000-0000-0000-0000-{:012d}"
BEHAVIOURS: list[dict[str, Any]] = [
    {"receives": False},
    {"receive_top": 1, "waitfor_s": 2},
    {"receive_top": 1, "waitfor_s": 10, "work_s": 3},
    {"receive_top": None, "waitfor_s": 5, "work_s": 1},
]


@dataclass
class World:
    seed: int
    version: int
    topology: dict[str, Any]
    # contract commands in order, each a JSON object with at_ms
    script: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conversations(self) -> int:
        return sum(1 for op in self.script if op["kind"] == "begin_dialog")


def _topology(rng: random.Random) -> tuple[dict[str, Any], list[tuple[str, str, str]], list[str]]:
    """The plain (contract) form, the (instance, database, queue) of each target queue, and the target services."""
    instances: list[dict[str, Any]] = []
    queues: list[tuple[str, str, str]] = []
    services: list[str] = []
    procedures = [
        {"name": f"p{i}", "receives": True, "receive_top": 1, "waitfor_ms": None, "work_ms": 0, **_behaviour(b)}
        for i, b in enumerate(BEHAVIOURS)
    ]
    for n in range(1, rng.randint(1, 3) + 1):
        name = f"sql{n}"
        db_queues, db_services, notifications = [], [], []
        if n == 1:
            db_queues.append(
                {
                    "name": "InitiatorQueue",
                    "activation": {"status": "OFF", "procedure_name": None, "max_queue_readers": 0},
                }
            )
            db_services.append({"name": "Initiator", "queue": "InitiatorQueue"})
        for k in range(rng.randint(1, 2)):
            queue, service = f"Q{n}{k}", f"Target{n}{k}"
            status = rng.random() < 0.7
            db_queues.append(
                {
                    "name": queue,
                    "activation": {
                        "status": "ON" if status else "OFF",
                        "procedure_name": rng.choice(procedures)["name"],
                        "max_queue_readers": rng.randint(0, 3),
                    },
                }
            )
            db_services.append({"name": service, "queue": queue})
            if rng.random() < 0.3:
                notifications.append({"name": f"N{n}{k}", "queue": queue, "event": "QUEUE_ACTIVATION"})
            queues.append((name, "db", queue))
            services.append(service)
        instances.append(
            {
                "name": name,
                "address": f"TCP://{name}.example:4022",
                "cpus": rng.randint(1, 2),
                "message_forwarding": rng.random() < 0.5,
                "msdb_routes": [_route("AutoCreatedLocal", None, "LOCAL")],
                "databases": [
                    {
                        "name": "db",
                        "broker_instance": GUID.format(n),
                        "procedures": procedures,
                        "queues": db_queues,
                        "services": db_services,
                        "event_notifications": notifications,
                        "mirroring_role": None,
                        "master_key": rng.random() < 0.9,
                        "routes": [_route("AutoCreatedLocal", None, "LOCAL")],
                    }
                ],
            }
        )
    shop_routes = instances[0]["databases"][0]["routes"]
    for service in services:
        home = int(service[len("Target")])
        address = f"TCP://sql{home}.example:4022"
        kind = rng.choice(["exact", "exact", "duplicate", "expired", "broker", "none"])
        if kind in ("exact", "duplicate", "expired"):
            lifetime = rng.randint(5, 60) if kind == "expired" else None
            shop_routes.append({**_route(f"To{service}", service, address), "lifetime_s": lifetime})
        if kind == "duplicate":
            shop_routes.append(_route(f"To{service}Again", service, address))
        if kind == "broker":
            shop_routes.append(
                {**_route(f"To{service}ByBroker", service, address), "broker_instance": GUID.format(home)}
            )
    if rng.random() < 0.3:
        shop_routes.append(_route("Anywhere", None, rng.choice([i["address"] for i in instances])))
    return {"instances": instances}, queues, services


def _behaviour(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"receives": spec.get("receives", True), "receive_top": spec.get("receive_top", 1)}
    out["waitfor_ms"] = None if spec.get("waitfor_s") is None else int(spec["waitfor_s"] * 1000)
    out["work_ms"] = int(spec.get("work_s", 0) * 1000)
    return out


def _route(name: str, service: str | None, address: str) -> dict[str, Any]:
    return {
        "name": name,
        "service_name": service,
        "broker_instance": None,
        "address": address,
        "mirror_address": None,
        "lifetime_s": None,
    }


def generate(seed: int, conversations: int = 5) -> World:
    rng = random.Random(f"sbtck-world:{GENERATOR_VERSION}:{seed}")
    topology, queues, services = _topology(rng)
    world = World(seed, GENERATOR_VERSION, topology)
    script = world.script
    script.append({"kind": "start", "at_ms": START_MS, "topology": topology})
    now = START_MS
    dialogs: list[str] = []
    sessions = ["S1", "S2"]
    in_transaction: set[str] = set()
    instances = [i["name"] for i in topology["instances"]]
    steps = conversations * 6
    for _ in range(steps):
        roll = rng.random()
        if (roll < 0.2 and len(dialogs) < conversations) or not dialogs:
            dialog = f"D{len(dialogs) + 1}"
            dialogs.append(dialog)
            script.append(
                {
                    "kind": "begin_dialog",
                    "at_ms": now,
                    "dialog": dialog,
                    "instance": "sql1",
                    "database": "db",
                    "from_service": "Initiator",
                    "to_service": rng.choice(services),
                }
            )
        elif roll < 0.55:
            for _ in range(rng.randint(1, 3)):
                script.append({"kind": "send", "at_ms": now, "dialog": rng.choice(dialogs)})
        elif roll < 0.7:
            session = rng.choice(sessions)
            instance, database, queue = rng.choice(queues)
            if session not in in_transaction and rng.random() < 0.5:
                script.append({"kind": "begin_transaction", "at_ms": now, "session": session})
                in_transaction.add(session)
            script.append(
                {
                    "kind": "receive",
                    "at_ms": now,
                    "session": session,
                    "top": rng.choice([None, 1, 2]),
                    "queue": {"instance": instance, "database": database, "queue": queue},
                    "where_dialog": None,
                    "where_group": None,
                    "waitfor_ms": None,
                }
            )
        elif roll < 0.78 and in_transaction:
            session = rng.choice(sorted(in_transaction))
            script.append({"kind": rng.choice(["commit", "rollback"]), "at_ms": now, "session": session})
            in_transaction.discard(session)
        elif roll < 0.83:
            instance, database, queue = rng.choice(queues)
            script.append(
                {
                    "kind": "alter_queue",
                    "at_ms": now,
                    "max_queue_readers": rng.randint(0, 3),
                    "queue": {"instance": instance, "database": database, "queue": queue},
                    "status": None,
                    "procedure_name": None,
                }
            )
        elif roll < 0.88 and len(instances) > 1:
            script.append(
                {
                    "kind": "set_reachable",
                    "at_ms": now,
                    "instance": rng.choice(instances[1:]),
                    "reachable": rng.random() < 0.5,
                }
            )
        else:
            now += rng.choice([0, 1000, 3000, 5000, 12000, 30000])
            script.append({"kind": "advance_time", "at_ms": now})
    for session in sorted(in_transaction):
        script.append({"kind": "commit", "at_ms": now, "session": session})
    end = now + 120_000
    script.append({"kind": "advance_time", "at_ms": end})
    for view in WAITING_VIEWS:
        script.append({"kind": "query_view", "at_ms": end, "view": view, "instance": None, "database": None})
    return world
