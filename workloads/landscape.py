"""The random topology of a world: instances, databases, queues, services and routes.

Kept apart from the script so a shrinker can drop topology elements one by
one: every element here is independent of the others except by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sbtck.contract import BROKER_CONFIGURATION_NOTICE, CAPABILITIES
from sbtck.topology import Activation, Database, EventNotification, Instance, Procedure, Queue, Route, Service, Topology
from sbtck.workloads.draw import Draw

ALL = frozenset(CAPABILITIES)

GUID = "00000000-0000-0000-0000-{:012d}"
BEHAVIOURS: list[dict[str, Any]] = [
    {"receives": False},
    {"receive_top": 1, "waitfor_ms": 2_000},
    {"receive_top": 1, "waitfor_ms": 10_000, "work_ms": 3_000},
    {"receive_top": None, "waitfor_ms": 5_000, "work_ms": 1_000},
]


@dataclass
class Landscape:
    """The topology and what the script generator may name in it."""

    topology: Topology
    # what the world may ask of an implementation: it is drawn within these capabilities
    capabilities: frozenset[str] = ALL
    queues: list[tuple[str, str, str]] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    # (instance, database) of every user database without a master key
    keyless: list[tuple[str, str]] = field(default_factory=list)
    # (instance, database) of the mirror copy of each mirroring pair
    mirrors: list[tuple[str, str]] = field(default_factory=list)
    # the queues no session reads: those of a mirrored database's copies (envelope.py says why)
    unread: set[tuple[str, str, str]] = field(default_factory=set)
    forwarders: list[str] = field(default_factory=list)
    notifications: list[tuple[str, tuple[str, str, str]]] = field(default_factory=list)
    # the services a first message surely reaches while no fault has struck, and the instance that holds them: one
    # route straight to that instance names the service (or the one instance holds every service), so no choice the
    # documents leave open can send it elsewhere; a reply, or dropping the connection it opened, is defined only
    # once it has arrived (generate.py)
    direct: dict[str, str] = field(default_factory=dict)

    def instance(self, name: str) -> Instance:
        return next(i for i in self.topology.instances if i.name == name)

    def address(self, name: str) -> str:
        return self.instance(name).address


def route(name: str, service: str | None, address: str, **options: Any) -> Route:
    return Route(name, service, address=address, **options)


def _procedures() -> list[Procedure]:
    return [Procedure(f"p{i}", **spec) for i, spec in enumerate(BEHAVIOURS)]


def _instance(name: str, rng: Draw, capabilities: frozenset[str] = ALL) -> Instance:
    return Instance(
        name,
        f"TCP://{name}.example:4022",
        cpus=rng.randint(1, 2),
        # each draw is made whatever the capabilities, so that a capability left out changes only what needs it
        message_forwarding=rng.random() < 0.3 and "forwarding" in capabilities,
        msdb_routes=[route("AutoCreatedLocal", None, "LOCAL")],
    )


def _database(land: Landscape, instance: Instance, name: str, guid: str, rng: Draw) -> Database:
    db = Database(
        name,
        guid,
        procedures=_procedures(),
        # a database without a master key is the periodic tasks' to start (PER-5C)
        master_key=rng.random() < 0.85 or "periodic_tasks" not in land.capabilities,
        routes=[route("AutoCreatedLocal", None, "LOCAL")],
    )
    instance.databases.append(db)
    if not db.master_key:
        land.keyless.append((instance.name, name))
    return db


def _queue(land: Landscape, instance: str, db: Database, queue: str, service: str, rng: Draw) -> None:
    activation = "activation" in land.capabilities
    db.queues.append(
        Queue(
            queue,
            Activation(
                "ON" if rng.random() < 0.7 and activation else "OFF",
                f"p{rng.randrange(len(BEHAVIOURS))}",
                rng.randint(0, 3),
            ),
        )
    )
    db.services.append(Service(service, queue))
    key = (instance, db.name, queue)
    land.queues.append(key)
    if rng.random() < 0.25 and activation and "external_activation" in land.capabilities:
        notification = f"N{queue}"
        db.event_notifications.append(EventNotification(notification, queue))
        land.notifications.append((notification, key))


def landscape(rng: Draw, capabilities: frozenset[str] = ALL) -> Landscape:
    """Several instances with routes between them: the world of an implementation that routes."""
    land = Landscape(Topology(), capabilities)
    instances = land.topology.instances
    home = _instance("sql1", rng, capabilities)
    instances.append(home)
    shop = _database(land, home, "db", GUID.format(10), rng)
    # every dialog begins and SENDs here: a SEND from a database whose broker never started is defined nowhere
    shop.master_key = True
    land.keyless.clear()
    _initiator(shop)
    if rng.random() < 0.3:
        _queue(land, "sql1", shop, "Q1", "Local1", rng)
        land.services.append("Local1")
    # (service, instance, broker instance) of every target service, for the routes below
    targets: list[tuple[str, str, str]] = []
    for n in range(2, rng.randint(2, 4) + 1):
        inst = _instance(f"sql{n}", rng, capabilities)
        instances.append(inst)
        db = _database(land, inst, "db", GUID.format(n * 10), rng)
        for k in range(rng.randint(1, 2)):
            # a service named after its address, for TRANSPORT routes (RTC-4)
            service = f"{inst.address}/T{n}{k}" if rng.random() < 0.2 else f"T{n}{k}"
            _queue(land, inst.name, db, f"Q{n}{k}", service, rng)
            targets.append((service, inst.name, db.broker_instance))
            if rng.random() < 0.15:
                # the same name in another case is another service: names compare exactly (RTM-1)
                twin = service.lower()
                _queue(land, inst.name, db, f"Q{n}{k}c", twin, rng)
                targets.append((twin, inst.name, db.broker_instance))
        if rng.random() < 0.25:
            # a second database with the same service: RTL-2 / RTL-3 and RTM-3 have something to pick from
            other = _database(land, inst, "db2", GUID.format(n * 10 + 1), rng)
            service = db.services[0].name
            _queue(land, inst.name, other, f"Q{n}9", service, rng)
            targets.append((service, inst.name, other.broker_instance))
        if rng.random() < 0.7:
            db.routes.append(route("ToInitiator", "Initiator", home.address))
    if rng.random() < 0.3 and "mirroring" in capabilities:
        _mirroring_pair(land, rng, targets)
    if rng.random() < 0.4 and "forwarding" in capabilities:
        _forwarders(land, rng, targets)
    land.services.extend(_to_keyed_databases(land, targets))
    _initiator_routes(land, rng, targets)
    return land


def _to_keyed_databases(land: Landscape, targets: list[tuple[str, str, str]]) -> list[str]:
    """The services a dialog may go to: none that a database without its master key holds, since for a message to a
    database whose broker has not started no document says what becomes of it (docs/implementing.md). Such a
    database stays, for the periodic tasks to start (PER-5C); where it would leave no service at all, it has its
    key. Its draw was made all the same, so that the rest of the world is the one the seed always drew."""
    services = list(dict.fromkeys(s for s, _, _ in targets))
    keyless = {s.name for i in land.topology.instances for d in i.databases if not d.master_key for s in d.services}
    if any(s not in keyless for s in services):
        return [s for s in services if s not in keyless]
    for instance in land.topology.instances:
        for db in instance.databases:
            if not db.master_key and db.services:
                db.master_key = True
                land.keyless.remove((instance.name, db.name))
    return services


def _initiator(db: Database) -> None:
    """The queue and service every dialog begins from."""
    db.queues.append(Queue("InitiatorQueue", Activation()))
    db.services.append(Service("Initiator", "InitiatorQueue"))


def _mirroring_pair(land: Landscape, rng: Draw, targets: list[tuple[str, str, str]]) -> None:
    guid = GUID.format(90)
    for name, role in (("sqlp", "principal"), ("sqlm", "mirror")):
        inst = _instance(name, rng, land.capabilities)
        land.topology.instances.append(inst)
        db = _database(land, inst, "ledger", guid, rng)
        db.mirroring_role = role
        db.master_key = True
        db.queues.append(Queue(f"LedgerQueue{name[-1]}", Activation(procedure_name="p1", max_queue_readers=1)))
        db.services.append(Service("Ledger", f"LedgerQueue{name[-1]}"))
        land.queues.append((name, "ledger", f"LedgerQueue{name[-1]}"))
        land.unread.add((name, "ledger", f"LedgerQueue{name[-1]}"))
    land.keyless[:] = [k for k in land.keyless if k[1] != "ledger"]
    land.mirrors.append(("sqlm", "ledger"))
    targets.append(("Ledger", "sqlp", guid))


def _forwarders(land: Landscape, rng: Draw, targets: list[tuple[str, str, str]]) -> None:
    """One forwarder with msdb routes on to the targets; sometimes a second that sends them back (RTX-1)."""
    names = ["fwd1", "fwd2"] if rng.random() < 0.4 else ["fwd1"]
    for name in names:
        inst = _instance(name, rng, land.capabilities)
        inst.message_forwarding = rng.random() < 0.85
        land.topology.instances.append(inst)
        land.forwarders.append(name)
    first = land.instance("fwd1")
    for service, instance, _ in targets:
        if len(names) == 2 and rng.random() < 0.5:
            first.msdb_routes.append(route(f"On{len(first.msdb_routes)}", service, land.address("fwd2")))
            land.instance("fwd2").msdb_routes.append(route(f"Back{len(first.msdb_routes)}", service, first.address))
        else:
            first.msdb_routes.append(route(f"On{len(first.msdb_routes)}", service, land.address(instance)))


def _initiator_routes(land: Landscape, rng: Draw, targets: list[tuple[str, str, str]]) -> None:
    routes = land.topology.instances[0].databases[0].routes
    seen: set[str] = set()
    for service, instance, guid in targets:
        address = land.address(instance)
        kinds = ["exact", "exact", "duplicate", "expired", "broker", "none"]
        if land.forwarders:
            kinds += ["forwarder", "both"]
        if service.startswith("TCP://"):
            kinds += ["transport", "transport"]
        if service == "Ledger":
            kinds = ["mirror", "mirror", "exact"]
        kind = rng.choice(kinds)
        if service in seen and kind not in ("broker", "none"):
            kind = "broker"
        seen.add(service)
        name = f"R{len(routes)}"
        if kind in ("exact", "duplicate", "expired", "both"):
            lifetime = rng.randint(5, 60) if kind == "expired" else None
            routes.append(route(name, service, address, lifetime_s=lifetime))
        if kind == "duplicate":
            routes.append(route(f"{name}a", service, address))
        if kind in ("forwarder", "both"):
            routes.append(route(f"{name}f", service, land.address(land.forwarders[0])))
        if kind == "broker":
            routes.append(route(name, service, address, broker_instance=guid))
        if kind == "transport":
            # for the service named after its address alone: the documents do not say where a TRANSPORT route
            # leads, and a message whose service name is no address would go nowhere defined (the reference's
            # placeholder address NONE)
            routes.append(route(name, service, "TRANSPORT"))
        if kind == "mirror":
            routes.append(route(name, "Ledger", address, mirror_address=land.address("sqlm")))
        if kind in ("exact", "duplicate") and service != "Ledger" and _keyed(land, instance, service):
            land.direct[service] = instance
    if rng.random() < 0.25 and "dynamic_routing" in land.capabilities:
        routes.append(route("Dynamic", BROKER_CONFIGURATION_NOTICE, rng.choice(land.topology.instances).address))
    if rng.random() < 0.25:
        routes.append(route("Anywhere", None, rng.choice(land.topology.instances).address))


def _keyed(land: Landscape, instance: str, service: str) -> bool:
    """Has every database of INSTANCE that holds SERVICE its master key, so that its broker surely starts?"""
    databases = land.instance(instance).databases
    return all(d.master_key for d in databases if any(s.name == service for s in d.services))


def local_landscape(rng: Draw, capabilities: frozenset[str]) -> Landscape:
    """One instance, one database, its queues: the world of an implementation that activates but does not route."""
    land = Landscape(Topology(), capabilities)
    home = _instance("sql1", rng, capabilities)
    land.topology.instances.append(home)
    shop = _database(land, home, "db", GUID.format(10), rng)
    shop.master_key = True  # alone, a database whose broker cannot start would receive nothing at all
    land.keyless.clear()
    _initiator(shop)
    for k in range(1, rng.randint(1, 3) + 1):
        _queue(land, "sql1", shop, f"Q{k}", f"Local{k}", rng)
        land.services.append(f"Local{k}")
    if rng.random() < 0.15:
        # a service whose name differs only in case is another service, with a queue of its own
        _queue(land, "sql1", shop, "Q1c", "local1", rng)
        land.services.append("local1")
    land.direct = dict.fromkeys(land.services, "sql1")  # one instance, its AutoCreatedLocal: a SEND delivers at once
    return land


def periodic_landscape(rng: Draw, capabilities: frozenset[str]) -> Landscape:
    """Instances and databases with and without master keys: the world of the periodic tasks alone."""
    land = Landscape(Topology(), capabilities)
    for n in range(1, rng.randint(1, 3) + 1):
        inst = _instance(f"sql{n}", rng, capabilities)
        land.topology.instances.append(inst)
        for k, name in enumerate(["db", "db2"][: rng.randint(1, 2)]):
            db = _database(land, inst, name, GUID.format(n * 10 + k), rng)
            db.procedures = []
    _initiator(land.topology.instances[0].databases[0])
    land.services.append("Initiator")
    return land
