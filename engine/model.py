"""The broker's objects: instances, databases, queues, services, messages."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueueKey:
    instance: str
    database: str
    queue: str

    def fields(self) -> dict[str, str]:
        return {"instance": self.instance, "database": self.database, "queue": self.queue}


@dataclass
class ReaderBehaviour:
    """What an activation stored procedure does, declared by the topology.

    A procedure that ``receives`` loops: RECEIVE (TOP ``receive_top``, with
    WAITFOR ``waitfor_ms`` when given) in a transaction, works ``work_ms`` on
    the rows while holding the conversation group lock, commits, and exits
    after a RECEIVE that returns an empty result set. One that does not
    receive runs until told to exit.
    """

    name: str
    receives: bool = True
    receive_top: int | None = 1
    waitfor_ms: int | None = None
    work_ms: int = 0


@dataclass
class Activation:
    status: bool = False
    procedure_name: str | None = None
    max_queue_readers: int = 0


@dataclass
class Message:
    queuing_order: int
    dialog: str
    group: str
    sequence: int
    message_type: str
    body: str
    arrived_ms: int

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
    key: QueueKey
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
    queue: QueueKey


@dataclass
class Database:
    name: str
    database_id: int
    broker_instance: str
    services: dict[str, Service] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    procedures: dict[str, ReaderBehaviour] = field(default_factory=dict)


@dataclass
class Instance:
    name: str
    address: str
    databases: dict[str, Database] = field(default_factory=dict)


@dataclass
class Conversation:
    """One dialog as its target sees it: messages land on ``queue`` in ``group``."""

    dialog: str
    initiator: Service
    target: Service
    queue: QueueKey
    group: str
    next_sequence: int = 0
