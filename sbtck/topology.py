"""The topology as the contract carries it: instances, databases, services, queues, routes, procedures and event
notifications, each a struct with what it leaves unsaid declared on its fields.

A topology is decoded once, where it enters: a topology file or a scenario's (sbtck/fixtures/topology.py, which
builds these structs after checking the file), a command's JSON (``decode``, through sbtck/contract.py), the
stage's generator (sbtck/workloads/landscape.py). The rest of the kit reads attributes
(tests/lint/test_topology_typed.py). An implementation receives the JSON of these structs, every field written, as
docs/protocol.md shows; one that omits a field in a command of its own gets the default written here.

The defaults are SQL Server's own: a queue's activation is OFF with no readers until ALTER QUEUE says otherwise, a
database has its master key, msdb and every database begin with the route AutoCreatedLocal.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from sbtck.errors import ContractError

# A route's address that is no network address: the instance itself (RTL)
LOCAL = "LOCAL"
# what a topology file's ``auto_created_local`` is when it says nothing: msdb and every database begin with
# AUTO_CREATED_LOCAL_ROUTE
AUTO_CREATED_LOCAL = True
# A topology file gives a procedure's times in seconds (work_s, waitfor_s); the contract in milliseconds
MS_PER_S = 1000


def auto_created_local(said: dict[str, Any]) -> Any:
    """What a topology file's instance or database SAID of ``auto_created_local``: AUTO_CREATED_LOCAL when nothing."""
    return said.get("auto_created_local", AUTO_CREATED_LOCAL)


def default_address(instance: str) -> str:
    """An instance's network address when its topology gives none."""
    return f"TCP://{instance.lower()}:4022"


class Procedure(msgspec.Struct):
    """An activation stored procedure, as the topology declares what it does (the engine's ReaderBehaviour): one
    that ``receives`` loops RECEIVE (TOP ``receive_top``, none when null; WAITFOR ``waitfor_ms`` when given) in a
    transaction, works ``work_ms`` holding the group's lock and commits; one that does not runs until told to exit."""

    name: str
    receives: bool = True
    receive_top: int | None = 1
    waitfor_ms: int | None = None
    work_ms: int = 0


class Activation(msgspec.Struct):
    """A queue's ACTIVATION (...) as CREATE QUEUE set it."""

    status: str = "OFF"
    procedure_name: str | None = None
    max_queue_readers: int = 0


class Queue(msgspec.Struct):
    name: str
    activation: Activation = msgspec.field(default_factory=Activation)


class Service(msgspec.Struct):
    name: str
    queue: str  # a queue of the same database


class EventNotification(msgspec.Struct):
    name: str
    queue: str  # a queue of the same database
    event: str = "QUEUE_ACTIVATION"


class Route(msgspec.Struct, frozen=True):
    """A route of sys.routes: CREATE ROUTE's options, ``lifetime_s`` seconds from when it is created."""

    name: str
    service_name: str | None = None
    broker_instance: str | None = None
    address: str = LOCAL
    mirror_address: str | None = None
    lifetime_s: int | float | None = None


class RouteChange(msgspec.Struct, frozen=True):
    """ALTER ROUTE: the options that are not null replace the route's."""

    name: str
    service_name: str | None = None
    broker_instance: str | None = None
    address: str | None = None
    mirror_address: str | None = None
    lifetime_s: int | float | None = None


# the route msdb and every database begin with
AUTO_CREATED_LOCAL_ROUTE = Route("AutoCreatedLocal")


class Database(msgspec.Struct):
    name: str
    broker_instance: str = ""
    procedures: list[Procedure] = []
    queues: list[Queue] = []
    services: list[Service] = []
    event_notifications: list[EventNotification] = []
    # None, or this copy's role in a database mirroring pair: "principal" or "mirror"
    mirroring_role: str | None = None
    master_key: bool = True
    routes: list[Route] = []


class Instance(msgspec.Struct):
    name: str
    address: str = ""  # unsaid: default_address(name)
    cpus: int = 1
    message_forwarding: bool = False
    msdb_routes: list[Route] = []
    databases: list[Database] = []

    def __post_init__(self) -> None:
        if not self.address:
            self.address = default_address(self.name)


class Topology(msgspec.Struct):
    instances: list[Instance] = []


# every part of a topology
FORMS = (Topology, Instance, Database, Procedure, Queue, Activation, Service, EventNotification, Route)
_Form = TypeVar("_Form", bound=msgspec.Struct)


def decode(data: Any, form: type[_Form], what: str) -> _Form:
    """DATA (a command's JSON) as FORM, the defaults filled in; ContractError naming the field that is not so."""
    if isinstance(data, form):
        return data
    try:
        return msgspec.convert(data, form)
    except msgspec.ValidationError as exc:
        raise ContractError(f"{what}: {exc}") from None


def plain(value: msgspec.Struct) -> dict[str, Any]:
    """A struct as its JSON object, every field written in the order declared."""
    encoded: dict[str, Any] = msgspec.to_builtins(value)
    return encoded
