"""A world is a pure function of (seed, generator version): a topology and a conversation script."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sbtck import catalogue, contract
from sbtck.topology import plain
from sbtck.workloads.draw import Draw
from sbtck.workloads.landscape import ALL, Landscape, landscape, local_landscape, periodic_landscape, route

GENERATOR_VERSION = 9
# the random stream a seed draws from, kept since generator 4: a world a later version leaves alone stays the same
STREAM = "sbtck-world:4"
# where a message that has neither arrived nor been dropped must be, at the end of a world
WAITING_VIEWS = ("sys.transmission_queue", "sbtck.forwarder", "sbtck.dispatcher_buffers")
START_MS = 1_767_225_600_000
# the broker's timer notifies every period from its start (PER-0); the documents fix the period, so no profile
# changes it and every implementation shares it
TIMER_MS = int(catalogue.load().params["timer_period_s"].value) * 1000
# how far past START_MS a world may start: off the timer's grid of the epoch, a timer counted from the clock's zero
# shows against one counted from the broker's start (PER-0)
START_SPREAD_MS = TIMER_MS - 1
# how long after its SEND a first message has surely arrived over the network, while no fault has struck: the
# transport connects at the SEND or at a notification (PER-2A, every 2nd), so within two timer periods
ARRIVED_WITHIN_MS = 3 * TIMER_MS
# the connection a first message opened surely stays this long after it was used: the transport closes
# connections idle for 90 seconds (PER-5A), at every 5th notification
CONNECTION_KEPT_MS = 60_000
# what the end of a world of the periodic tasks alone asks
PERIODIC_VIEW = "sbtck.periodic_state"
# the areas a world is drawn in, the first the implementation declares: routing worlds, then activation, then periodic
AREAS = ("routing", "activation", "periodic_tasks")
# what a world of each area judges, of what the implementation declares: a routing world asks everything (activation
# on its queues, the periodic tasks' faults), a world of activation or of the periodic tasks only its own, so that a
# capability declared for what another area needs (routing, for the periodic tasks' transport) is not judged there
SCOPES = {
    "routing": ALL,
    "activation": frozenset({"activation", "external_activation", "decision_trace"}),
    "periodic_tasks": frozenset({"periodic_tasks", "decision_trace"}),
}
# contract commands that only some implementations take, by the capability they need (as the contract declares)
NEEDS = {kind: command.needs for kind, command in contract.COMMANDS.items() if command.needs is not None}


@dataclass
class StageWorld:
    """A world of the randomized stage: a topology and a script of contract commands, a function of its seed and the
    generator version (steps.world.World is a scenario's, which runs one against an implementation)."""

    seed: int
    version: int
    topology: dict[str, Any]
    # contract commands in order, each a JSON object with at_ms
    script: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conversations(self) -> int:
        return sum(1 for op in self.script if op["kind"] == "begin_dialog")

    @property
    def start_ms(self) -> int:
        return int(self.script[0]["at_ms"]) if self.script else START_MS


def _queue_ref(key: tuple[str, str, str]) -> dict[str, str]:
    return {"instance": key[0], "database": key[1], "queue": key[2]}


class _Conversations:
    """The state the generator keeps while it writes one script: its conversations' commands, and what surely has
    happened so far (the faults, ``_Script``, make some of it unsure)."""

    def __init__(self, rng: Draw, land: Landscape, conversations: int) -> None:
        self.rng, self.land, self.conversations = rng, land, conversations
        self.capabilities = land.capabilities
        self.routing = "routing" in land.capabilities
        self.ops: list[dict[str, Any]] = []
        self.now = START_MS + (rng.randint(1, START_SPREAD_MS) if rng.random() < 0.5 else 0)
        self.dialogs: list[str] = []
        self.sent: dict[str, int] = {}
        self.in_transaction: set[str] = set()
        # a session in RECEIVE or GET CONVERSATION GROUP with WAITFOR runs no other statement until it returns,
        # at its time-out at the latest: before then no document says what a command from it would do
        self.busy_until: dict[str, int] = {}
        self.start_ms = self.now
        # what surely happens despite the faults so far: by when each dialog's first message arrives at its target
        # (Landscape.direct), and when sql1 last sent over its connection to each address; and what a fault made
        # unsure from then on (everything, once a route the others take may have changed)
        self.arrives: dict[str, int] = {}
        self.connected: dict[str, int] = {}
        self.to_service: dict[str, tuple[str, str | None]] = {}
        self.unsure: set[str] = set()  # instances, services and dialogs whose messages a fault may hold
        self.all_unsure = False

    def add(self, kind: str, **fields: Any) -> None:
        self.ops.append({"kind": kind, "at_ms": self.now, **fields})

    def dialog(self) -> None:
        rng = self.rng
        name = f"D{len(self.dialogs) + 1}"
        self.dialogs.append(name)
        broker = None
        if rng.random() < 0.1 and self.routing:
            guids = sorted({d.broker_instance for i in self.land.topology.instances for d in i.databases})
            broker = rng.choice(guids)
        service = rng.choice(self.land.services)
        self.to_service[name] = (service, broker)
        self.add(
            "begin_dialog",
            dialog=name,
            instance="sql1",
            database="db",
            from_service="Initiator",
            to_service=service,
            to_broker_instance=broker,
        )

    def send(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            dialog = self.rng.choice(self.dialogs)
            # a target replies on a conversation it has: before its first message has surely arrived, no document
            # says what a reply would do (the reference refuses it)
            reply = self.rng.random() < 0.1
            if reply:
                ready = [d for d in self.dialogs if self.arrived(d)]
                reply = bool(ready)
                dialog = self.rng.choice(ready) if ready else dialog
            if not reply:
                self.first_send(dialog)
                self.sent[dialog] = self.sent.get(dialog, 0) + 1
            self.add("send", dialog=dialog, from_target=reply)

    def first_send(self, dialog: str) -> None:
        """Notes when a dialog's first message surely arrives and when the connection its messages take was surely
        used (Landscape.direct: no choice the documents leave open sends them elsewhere), unless a fault interferes."""
        service, broker = self.to_service[dialog]
        instance = self.land.direct.get(service)
        if instance is None or broker is not None or self.all_unsure or self.unsure & {instance, service, dialog}:
            return
        remote = instance != "sql1"
        if dialog not in self.sent:
            self.arrives[dialog] = self.now + ARRIVED_WITHIN_MS * remote
        if remote:
            self.connected[self.land.address(instance)] = self.now

    def arrived(self, dialog: str) -> bool:
        return self.arrives.get(dialog, self.now + 1) <= self.now

    def open_connection(self) -> str | None:
        """An address sql1 surely has a connection to now (dropping one that does not exist is defined nowhere)."""
        surely = [a for a, at in self.connected.items() if at + ARRIVED_WITHIN_MS <= self.now < at + CONNECTION_KEPT_MS]
        return self.rng.choice(sorted(surely)) if surely else None

    def disturb(self, *what: str) -> None:
        """A fault about WHAT (instances, services, dialogs; nothing named: anything) makes unsure what had not
        surely happened yet: arrivals still to come, connections not yet surely open, and those to an instance
        named."""
        if not what:
            self.all_unsure = True
        self.unsure.update(what)
        instances = {i for i in what if any(i == x.name for x in self.land.topology.instances)}
        for dialog, at in list(self.arrives.items()):
            service = self.to_service[dialog][0]
            touched = not what or {dialog, service, self.land.direct.get(service)} & set(what)
            if at > self.now and touched:
                del self.arrives[dialog]
        for address, at in list(self.connected.items()):
            gone = any(self.land.address(i) == address for i in instances)
            if gone or at + ARRIVED_WITHIN_MS > self.now:
                del self.connected[address]

    def free(self, session: str) -> bool:
        return self.busy_until.get(session, self.now) <= self.now

    def receive(self) -> None:
        rng = self.rng
        sessions = [s for s in ("S1", "S2") if self.free(s)]
        if not sessions:
            return
        session = rng.choice(sessions)
        queue = _queue_ref(rng.choice([q for q in self.land.queues if q not in self.land.unread]))
        if session not in self.in_transaction and rng.random() < 0.5:
            self.add("begin_transaction", session=session)
            self.in_transaction.add(session)
        waitfor = rng.choice([None, None, None, 1000, 5000])
        if waitfor is not None:
            self.busy_until[session] = self.now + waitfor
        if rng.random() < 0.1:
            self.add("get_conversation_group", session=session, queue=queue, waitfor_ms=waitfor)
            return
        where = rng.choice(self.dialogs) if rng.random() < 0.15 else None
        self.add(
            "receive",
            session=session,
            top=rng.choice([None, 1, 2]),
            queue=queue,
            where_dialog=where,
            where_group=None,
            waitfor_ms=waitfor,
        )

    def end_transaction(self) -> None:
        sessions = sorted(s for s in self.in_transaction if self.free(s))
        if not sessions:
            return
        session = self.rng.choice(sessions)
        self.add(self.rng.choice(["commit", "rollback"]), session=session)
        self.in_transaction.discard(session)

    def alter(self) -> None:
        rng = self.rng
        status = rng.choice([None, None, "ON", "OFF"])
        if "activation" not in self.capabilities:
            return
        self.add(
            "alter_queue",
            queue=_queue_ref(rng.choice(self.land.queues)),
            status=status,
            procedure_name=None,
            max_queue_readers=rng.randint(0, 3),
        )

    def advance(self) -> None:
        self.now += self.rng.choice([0, 1000, 3000, 5000, 12000, 30000])
        self.add("advance_time")


class _Script(_Conversations):
    """The generator's state while it writes one script, with the faults it strikes."""

    def __init__(self, rng: Draw, land: Landscape, conversations: int) -> None:
        super().__init__(rng, land, conversations)
        # per instance, how many task handlers failed since which notification (PER-1B restarts them at each)
        self.failed_handlers: dict[str, tuple[int, int]] = {}
        # the event notifications and sql1.db's routes there are now: creating one that exists, or dropping or
        # altering one that does not, is refused by the reference and defined by no document
        self.notified = {name for name, _ in land.notifications}
        self.route_names = {r.name for r in land.topology.instances[0].databases[0].routes}

    def fault(self) -> None:
        rng, land = self.rng, self.land
        choices = ["reachable", "drop_connection", "routes", "handlers", "dispatcher"]
        choices += ["failover"] * bool(land.mirrors) + ["forwarding"] * bool(land.forwarders)
        choices += ["master_key"] * bool(land.keyless) + ["notification"] * bool(land.notifications)
        choices += ["lose", "transmission"] * bool(self.sent)
        if self.capabilities != ALL:
            choices = [c for c in choices if _allowed(c, self.capabilities)]
            if not choices:
                return
        kind = rng.choice(choices)
        address = self.open_connection() if kind == "drop_connection" else None
        written = len(self.ops)
        self.strike(kind, address)
        for op in self.ops[written:]:
            what = _disturbs(op, land)
            if what is not None:
                self.disturb(*what)

    def strike(self, kind: str, address: str | None) -> None:
        rng, land = self.rng, self.land
        names = [i.name for i in land.topology.instances]
        if kind == "reachable" and len(names) > 1:
            self.add("set_reachable", instance=rng.choice(names[1:]), reachable=rng.random() < 0.5)
        elif kind == "drop_connection":
            if address is not None:
                self.add("drop_connection", instance="sql1", address=address)
        elif kind == "failover":
            instance, database = land.mirrors[0]
            self.add("failover", instance=rng.choice([instance, "sqlp"]), database=database)
        elif kind == "forwarding":
            self.add("set_message_forwarding", instance=rng.choice(land.forwarders), active=rng.random() < 0.5)
        elif kind == "master_key":
            instance, database = rng.choice(land.keyless)
            self.add("create_master_key", instance=instance, database=database)
        elif kind == "notification":
            name, key = rng.choice(land.notifications)
            rng.random()  # was the verb, drawn at random: what exists decides it now
            verb = "drop_event_notification" if name in self.notified else "create_event_notification"
            self.notified ^= {name}
            self.add(verb, name=name, queue=_queue_ref(key))
        elif kind == "lose":
            dialog = rng.choice(sorted(self.sent))
            self.add("lose_in_transit", dialog=dialog, sequence=rng.randint(1, self.sent[dialog]), from_target=False)
        elif kind == "transmission":
            self.add(
                "fail_transmission", dialog=rng.choice(sorted(self.sent)), reason=rng.choice(["resource", "security"])
            )
        elif kind == "handlers":
            self.fail_handlers(rng.choice(names), rng.randint(1, 2))
        elif kind == "dispatcher":
            mode = rng.choice(["stopped", "running", "running"])
            delay = 0 if mode == "stopped" else rng.choice([0, 0, 5, 20])
            self.add("set_dispatcher_saving", instance=rng.choice(names), mode=mode, delay_s=delay)
        else:
            self.routes()

    def routes(self) -> None:
        rng, land = self.rng, self.land
        service = rng.choice(land.services)
        target = rng.choice(land.topology.instances).address
        verb = rng.choice(["create_route", "alter_route", "drop_route", "answer_routing_request"])
        if verb == "answer_routing_request" and "dynamic_routing" not in self.capabilities:
            verb = "create_route"
        if verb == "drop_route":
            name = rng.choice(["R1", "R2", "AutoCreatedLocal"])
            if name in self.route_names:
                self.route_names.discard(name)
                self.add("drop_route", instance="sql1", database="db", name=name)
        elif verb == "answer_routing_request":
            if f"Dynamic_{service}" in self.route_names:  # answered already: its route exists, CREATE ROUTE is refused
                return
            self.route_names.add(f"Dynamic_{service}")
            self.add(
                "answer_routing_request",
                instance="sql1",
                database="db",
                route=plain(route(f"Dynamic_{service}", service, target)),
            )
        else:
            name = f"New{len(self.ops)}" if verb == "create_route" else "R1"
            lifetime = rng.choice([None, None, 20])
            if verb == "alter_route" and _pair_of_one(self.land, name, target):
                return
            if verb == "create_route" or name in self.route_names:
                self.route_names.add(name)
                self.add(
                    verb,
                    instance="sql1",
                    database="db",
                    route=plain(route(name, service, target, lifetime_s=lifetime)),
                )

    def fail_handlers(self, instance: str, count: int) -> None:
        """At most as many as surely run: PER-1B starts "up to 2 x CPUs", so one per CPU (tests/variants/allowed.py
        starts no more), less those failed since the last notification; failing more is defined nowhere."""
        notification = (self.now - self.start_ms) // TIMER_MS
        failed, since = self.failed_handlers.get(instance, (0, notification))
        if since != notification:
            failed = 0
        cpus = self.land.instance(instance).cpus
        count = min(count, cpus - failed)
        if count > 0:
            self.failed_handlers[instance] = (failed + count, notification)
            self.add("fail_task_handlers", instance=instance, count=count)


# faults that hold no message of a service Landscape.direct names: those of mirrors, forwarders, master keys and
# notifications are elsewhere
_HARMLESS = frozenset(
    {"failover", "set_message_forwarding", "create_master_key", "create_event_notification", "drop_event_notification"}
)


def _disturbs(op: dict[str, Any], land: Landscape) -> tuple[str, ...] | None:
    """What a fault may hold messages of: instances, services or dialogs; () for anything; None for nothing."""
    kind = op["kind"]
    if kind in _HARMLESS:
        return None
    if kind in ("set_reachable", "set_dispatcher_saving", "fail_task_handlers"):
        # sql1 sends every first message: a fault there holds them all
        return () if op["instance"] == "sql1" else (op["instance"],)
    if kind == "drop_connection":
        return tuple(i.name for i in land.topology.instances if i.address == op["address"])
    if kind in ("lose_in_transit", "fail_transmission"):
        return (op["dialog"],)
    if kind in ("create_route", "answer_routing_request"):
        return (op["route"]["service_name"],)
    return ()  # a route altered or dropped: any message may take another way


# the contract commands each kind of fault writes (routes: answer_routing_request only where dynamic_routing is
# declared, else create_route)
FAULTS: dict[str, tuple[type[contract.Command], ...]] = {
    "reachable": (contract.SetReachable,),
    "drop_connection": (contract.DropConnection,),
    "routes": (contract.CreateRoute, contract.AlterRoute, contract.DropRoute),
    "handlers": (contract.FailTaskHandlers,),
    "dispatcher": (contract.SetDispatcherSaving,),
    "failover": (contract.Failover,),
    "forwarding": (contract.SetMessageForwarding,),
    "master_key": (contract.CreateMasterKey,),
    "notification": (contract.CreateEventNotification, contract.DropEventNotification),
    "lose": (contract.LoseInTransit,),
    "transmission": (contract.FailTransmission,),
}
# what a fault's aftermath asks beyond its commands: an instance back within reach is connected to again only by the
# transport's periodic task (PER-2A), so a broker without it cannot be judged on what follows
AFTERMATH = {"reachable": frozenset({"periodic_tasks"})}
# what each kind of fault asks of an implementation: its commands' needs, as the contract declares them
FAULT_NEEDS = {
    fault: frozenset(c.needs for c in commands if c.needs is not None) | AFTERMATH.get(fault, frozenset())
    for fault, commands in FAULTS.items()
}


def _allowed(fault: str, capabilities: frozenset[str]) -> bool:
    return FAULT_NEEDS[fault] <= capabilities


def generate(
    seed: int, conversations: int = 5, capabilities: Iterable[str] | None = None, areas: Iterable[str] | None = None
) -> StageWorld:
    """The world of this seed, drawn within the capabilities given (all of them by default).

    A world belongs to one area (``AREAS``): routing worlds have several
    instances; activation worlds, one instance and its queues; periodic
    worlds, instances, master keys and time. It is drawn in the first area
    the capabilities declare, or, given AREAS, in one of them by turns
    (seed modulo their count). Within each, what a missing capability would
    be needed for is left out, and so is what the area does not judge
    (SCOPES).
    """
    declared = ALL if capabilities is None else frozenset(capabilities)
    rng = Draw(f"{STREAM}:{seed}")
    area = area_of(seed, declared, areas)
    caps = declared & SCOPES[area]
    if area == "periodic_tasks":
        return _periodic_world(seed, rng, periodic_landscape(rng, caps), conversations)
    land = landscape(rng, caps) if area == "routing" else local_landscape(rng, caps)
    world = StageWorld(seed, GENERATOR_VERSION, plain(land.topology))
    s = _Script(rng, land, conversations)
    s.add("start", topology=world.topology)
    steps = conversations * 6
    for done in range(steps):
        roll = rng.random()
        # every world has exactly its conversations: the last steps begin those still missing
        missing = conversations - len(s.dialogs)
        if (roll < 0.2 and missing > 0) or not s.dialogs or missing >= steps - done:
            s.dialog()
        elif roll < 0.5:
            s.send()
        elif roll < 0.65:
            s.receive()
        elif roll < 0.72 and s.in_transaction:
            s.end_transaction()
        elif roll < 0.76:
            s.alter()
        elif roll < 0.84:
            s.fault()
        else:
            s.advance()
    waiting = max((s.busy_until.get(session, s.now) for session in s.in_transaction), default=s.now)
    if waiting > s.now:  # the last commits come once their sessions' WAITFOR has returned
        s.now = waiting
        s.add("advance_time")
    for session in sorted(s.in_transaction):
        s.add("commit", session=session)
    s.now += 120_000
    s.add("advance_time")
    # where a message may wait is the routing implementation's to show (in any area, its routes may change); in one
    # instance without routing every message arrives
    for view in WAITING_VIEWS if "routing" in caps else ():
        s.add("query_view", view=view, instance=None, database=None)
    world.script = s.ops
    return world


def judged(seed: int, capabilities: Iterable[str], areas: Iterable[str] | None = None) -> frozenset[str]:
    """What world SEED judges of the CAPABILITIES declared: those of its area (SCOPES), which it is drawn within."""
    declared = frozenset(capabilities)
    return declared & SCOPES[area_of(seed, declared, areas)]


def known_areas(areas: Iterable[str]) -> list[str]:
    """AREAS named, each once, in order; a ValueError names one that is not an area."""
    asked = list(dict.fromkeys(areas))
    unknown = [a for a in asked if a not in AREAS]
    if unknown or not asked:
        raise ValueError(f"no area {', '.join(unknown) or '(none given)'}: the areas are {', '.join(AREAS)}")
    return asked


def area_of(seed: int, capabilities: frozenset[str], areas: Iterable[str] | None = None) -> str:
    """The area world SEED is drawn in (see generate); a ValueError says what to declare or ask for instead."""
    if areas is None:
        area = next((a for a in AREAS if a in capabilities), None)
        if area is None:
            raise ValueError(
                f"declares none of {', '.join(AREAS)}: no world can be drawn for it"
                f" (declared: {', '.join(sorted(capabilities)) or 'nothing'})"
            )
        return area
    asked = known_areas(areas)
    undeclared = [a for a in asked if a not in capabilities]
    if undeclared:
        raise ValueError(
            f"area {', '.join(undeclared)} is not among the capabilities declared ({', '.join(sorted(capabilities))})"
        )
    return asked[seed % len(asked)]


def _periodic_world(seed: int, rng: Draw, land: Landscape, conversations: int) -> StageWorld:
    """Dialogs (so that clean-up has work), failing task handlers, master keys, stopped clean-ups, time."""
    world = StageWorld(seed, GENERATOR_VERSION, plain(land.topology))
    s = _Script(rng, land, conversations)
    s.add("start", topology=world.topology)
    databases = [(i.name, d.name) for i in land.topology.instances for d in i.databases]
    for _ in range(conversations * 4):
        roll = rng.random()
        if roll < 0.2 and len(s.dialogs) < conversations:
            s.dialogs.append(f"D{len(s.dialogs) + 1}")
            s.add(
                "begin_dialog",
                dialog=s.dialogs[-1],
                instance="sql1",
                database="db",
                from_service="Initiator",
                to_service="Initiator",
                to_broker_instance=None,
            )
        elif roll < 0.35:
            instance = rng.choice(land.topology.instances).name
            s.fail_handlers(instance, rng.randint(1, 2))
        elif roll < 0.45 and land.keyless:
            instance, database = rng.choice(land.keyless)
            s.add("create_master_key", instance=instance, database=database)
        elif roll < 0.55:
            instance, database = rng.choice(databases)
            s.add("stop_ack_cleanup", instance=instance, database=database)
        else:
            s.advance()
    s.now += 60_000
    s.add("advance_time")
    s.add("query_view", view=PERIODIC_VIEW, instance=None, database=None)
    world.script = s.ops
    return world


def needs(world: StageWorld) -> set[str]:
    """The capabilities an implementation must declare to run this world."""
    found = {NEEDS[op["kind"]] for op in world.script if op["kind"] in NEEDS}
    instances = world.topology["instances"]
    sends = any(op["kind"] == "send" for op in world.script)
    if (len(instances) > 1 and sends) or any(
        op["kind"] == "query_view" and op["view"] in WAITING_VIEWS for op in world.script
    ):
        found.add("routing")
    for instance in instances:
        if instance["message_forwarding"] or instance["name"].startswith("fwd"):
            found.add("forwarding")
        for db in instance["databases"]:
            found.update(["mirroring"] * (db["mirroring_role"] is not None))
            found.update(["external_activation", "activation"] * bool(db["event_notifications"]))
            found.update(["dynamic_routing"] * any(r["name"] == "Dynamic" for r in db["routes"]))
            found.update(["activation"] * any(q["activation"]["status"] == "ON" for q in db["queues"]))
            found.update(["periodic_tasks"] * (not db["master_key"]))
            found.update(["routing"] * any(r["name"] != "AutoCreatedLocal" for r in db["routes"]))
            # without AutoCreatedLocal even a message to the same database is a question of routes (RTE-01)
            found.update(["routing"] * (sends and all(r["name"] != "AutoCreatedLocal" for r in db["routes"])))
        found.update(["routing"] * any(r["name"] != "AutoCreatedLocal" for r in instance["msdb_routes"]))
    if any(op["kind"] == "query_view" and op["view"] == PERIODIC_VIEW for op in world.script):
        found.add("periodic_tasks")
    return found


def _pair_of_one(land: Landscape, name: str, address: str) -> bool:
    """Would ALTER ROUTE NAME's ADDRESS make it its own mirror address? The route of a mirrored database names the
    two partners ("envia uma solicitação para ambos os endereços"); one address twice names no pair, and no
    document says what asking both, or sending to "o outro endereço do par", means then."""
    routes = land.topology.instances[0].databases[0].routes
    mirror = next((r.mirror_address for r in routes if r.name == name), None)
    return mirror is not None and str(mirror).upper() == address.upper()
