"""The broker's objects: instances, databases, queues, services, messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from sbtck.contract import BROKER_CONFIGURATION_NOTICE, LOCAL, QueueRef


@dataclass(init=False)
class ReaderBehaviour:
    """What an activation stored procedure does, declared by the topology.

    A procedure that ``receives`` loops: RECEIVE (TOP ``receive_top``, with
    WAITFOR ``waitfor_ms`` when given) in a transaction, works ``work_ms`` on
    the rows while holding the conversation group lock, commits, and exits
    after a RECEIVE that returns an empty result set. One that does not
    receive runs until told to exit.
    """

    name: str
    receives: bool
    receive_top: int | None
    waitfor_ms: int | None
    work_ms: int

    def __init__(
        self, name: str, receives: bool, receive_top: int | None, waitfor_ms: int | None, work_ms: int
    ) -> None:
        self.name, self.receives, self.receive_top = name, receives, receive_top
        self.waitfor_ms, self.work_ms = waitfor_ms, work_ms


@dataclass
class Activation:
    """A queue's activation, as the topology (sbtck.topology.Activation) or ALTER QUEUE set it."""

    status: bool
    procedure_name: str | None
    max_queue_readers: int


@dataclass(init=False)
class Message:
    queuing_order: int
    dialog: str
    group: str
    sequence: int
    message_type: str
    body: str
    arrived_ms: int

    def __init__(
        self, queuing_order: int, dialog: str, group: str, sequence: int, message_type: str, body: str, arrived_ms: int
    ) -> None:
        self.queuing_order, self.dialog, self.group, self.sequence = queuing_order, dialog, group, sequence
        self.message_type, self.body, self.arrived_ms = message_type, body, arrived_ms

    def row(self) -> dict[str, object]:
        return {
            "dialog": self.dialog,
            "conversation_group": self.group,
            "message_sequence_number": self.sequence,
            "message_type_name": self.message_type,
            "message_body": self.body,
        }


@dataclass
class Queue:
    key: QueueRef
    queue_id: int
    database_id: int
    activation: Activation
    messages: list[Message] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)

    def unread(self) -> int:
        return len(self.messages)


@dataclass
class Service:
    name: str
    queue: QueueRef


@dataclass(init=False)
class Route:
    name: str
    service_name: str | None = None
    broker_instance: str | None = None
    address: str = LOCAL
    mirror_address: str | None = None
    expires_ms: int | None = None

    def __init__(
        self,
        name: str,
        service_name: str | None = None,
        broker_instance: str | None = None,
        address: str = LOCAL,
        mirror_address: str | None = None,
        expires_ms: int | None = None,
    ) -> None:
        self.name, self.service_name, self.broker_instance, self.address = name, service_name, broker_instance, address
        self.mirror_address, self.expires_ms = mirror_address, expires_ms

    @property
    def dynamic(self) -> bool:
        return self.service_name == BROKER_CONFIGURATION_NOTICE

    def identity(self) -> tuple[str | None, str | None, str]:
        """RTC-0: routes alike in broker instance, service name and address count as one."""
        return (self.broker_instance, self.service_name, self.address.upper())

    def row(self) -> dict[str, object]:
        return {
            "name": self.name,
            "remote_service_name": self.service_name,
            "broker_instance": self.broker_instance,
            "address": self.address,
            "mirror_address": self.mirror_address,
            "expires_ms": self.expires_ms,
        }


@dataclass
class Database:
    name: str
    database_id: int
    broker_instance: str
    # with broker_started and ack_cleanup_running, the one place these live: the periodic tasks change them (PER-5C,
    # PER-5E), delivery reads them
    master_key: bool
    services: dict[str, Service] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    procedures: dict[str, ReaderBehaviour] = field(default_factory=dict)
    routes: dict[str, Route] = field(default_factory=dict)
    # None, or this copy's role in a database mirroring pair: "principal" or "mirror"
    mirroring_role: str | None = None
    broker_started: bool = True
    ack_cleanup_running: bool = True

    @property
    def online(self) -> bool:
        return self.mirroring_role != "mirror" and self.broker_started


@dataclass
class Instance:
    name: str
    address: str
    forwarding: bool
    cpus: int
    databases: dict[str, Database] = field(default_factory=dict)
    msdb_routes: dict[str, Route] = field(default_factory=dict)
    reachable: bool = True

    def by_broker_instance(self, guid: str) -> Database | None:
        return next((d for d in self.databases.values() if d.broker_instance == guid.upper()), None)

    def has_service(self, name: str) -> bool:
        return any(name in d.services and d.online for d in self.databases.values())


@dataclass(init=False)
class Endpoint:
    instance: str
    database: str
    service: str
    broker_instance: str

    def __init__(self, instance: str, database: str, service: str, broker_instance: str) -> None:
        self.instance, self.database, self.service, self.broker_instance = instance, database, service, broker_instance


@dataclass
class Conversation:
    """A dialog: its initiator, the target it has reached (once it has), and what routing knows."""

    dialog: str
    initiator: Endpoint
    target_service: str
    target_broker_instance: str | None = None
    target: Endpoint | None = None
    next_sequence: int = 0
    reply_sequence: int = 0
    acknowledged: bool = False
    # how many messages each side has received, in order: (to the target, to the initiator)
    received: list[int] = field(default_factory=lambda: [0, 0])


@dataclass(init=False)
class Envelope:
    """A message on its way: what routing sees of it."""

    dialog: str
    sequence: int
    to_service: str
    to_broker_instance: str | None
    from_target: bool
    message_type: str = "DEFAULT"
    body: str = ""
    hops: int = 0

    def __init__(
        self,
        dialog: str,
        sequence: int,
        to_service: str,
        to_broker_instance: str | None,
        from_target: bool,
        message_type: str = "DEFAULT",
        body: str = "",
        hops: int = 0,
    ) -> None:
        self.dialog, self.sequence, self.to_service = dialog, sequence, to_service
        self.to_broker_instance, self.from_target = to_broker_instance, from_target
        self.message_type, self.body, self.hops = message_type, body, hops

    def fields(self) -> dict[str, object]:
        return {"dialog": self.dialog, "message_sequence_number": self.sequence, "from_target": self.from_target}
