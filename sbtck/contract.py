"""Commands and observations of the contract, as plain JSON-ready data.

Every command carries ``at_ms``, the harness's frozen time in epoch
milliseconds: the implementation first runs whatever fell due up to that
time (timer notifications every 5 seconds from broker start, WAITFOR
time-outs, ...) and then applies the command. No implementation reads a
clock of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import msgspec

from sbtck.errors import ContractError
from sbtck.topology import LOCAL as LOCAL
from sbtck.topology import Route, RouteChange, Topology, decode, plain
from sbtck.views import VIEW_COLUMNS

PROTOCOL_VERSION = "2.3"  # what each version asks beyond the one before: docs/changes.md

# What an implementation may declare. A feature or scenario tagged @requires-NAME (NAME with
# dashes) is not applicable without NAME.
REQUIRES_TAG = "requires-"
CAPABILITIES = (
    "activation",  # queue monitors and internal activation
    "external_activation",
    "routing",  # several instances, routes, the transport between them
    "mirroring",
    "dynamic_routing",
    "forwarding",
    "periodic_tasks",
    # the model's reasoning as events (observations.DECISION_TRACE, DECISION_FIELDS): without it the
    # scenarios check only what a real broker shows
    "decision_trace",
)

VIEWS = tuple(VIEW_COLUMNS)  # what query_view answers; sys.routes and sys.transmission_queue take an instance

# What a run says of a scenario (results.json) and the stage of a world (summary.json): the kit's own words, which the
# reports and the stage read alike
PASSED, FAILED, ERROR, NOT_APPLICABLE = "passed", "failed", "error", "not applicable"

# A route's address that is no network address: the instance itself (RTL, declared with the topology's form), or the
# address the message came from
TRANSPORT = "TRANSPORT"
# The service a route to a dynamic routing service names (RTM-4).
BROKER_CONFIGURATION_NOTICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"


class QueueRef(NamedTuple):
    """A queue, named as everywhere in the kit: instance, database, queue."""

    # A named tuple rather than a frozen dataclass: the engine keys most of its tables by queue, a dozen lookups a
    # message, and a tuple hashes and compares in C where a dataclass calls its Python __hash__ and __eq__ (in the
    # compiled build too, as this module is not compiled). Its JSON is an object all the same (Command.to_json).
    instance: str
    database: str
    queue: str

    def fields(self) -> dict[str, str]:
        """The event fields that name the queue."""
        return {"instance": self.instance, "database": self.database, "queue": self.queue}


@dataclass(frozen=True)
class Result:
    """An object; the kit reads none of its fields (an implementation may say in it what it likes)."""


@dataclass(frozen=True)
class ViewResult(Result):
    """``rows``: the view's rows, each an object of every column the view declares (see Views of query_view)."""

    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Command:
    """A command of the contract, declared once: its kind, its fields, its result and the capability an
    implementation takes it with. The rest is derived from this: the reference engine runs it with the Broker
    method of its kind (the time first, then the fields by name), the randomized stage writes it only for an
    implementation that declares ``needs``, and a reproducer says it with the step registered to say it
    (sbtck/steps/vocabulary.py). tests/contract/test_commands.py fails on a command missing any of them."""

    kind: ClassVar[str] = ""
    # what the answer's ``result`` holds when the command is taken: checked as declared, the rest not read
    result: ClassVar[type[Result]] = Result
    # the capability an implementation declares to be sent it (None: every implementation)
    needs: ClassVar[str | None] = None
    at_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **{f.name: _json(getattr(self, f.name)) for f in dataclasses.fields(self)}}


@dataclass(frozen=True)
class Start(Command):
    """Declare the topology and start the broker of every database at ``at_ms``.

    The topology is written whole, every field with its default included: ``topology.Topology`` of
    docs/protocol.schema.json (sbtck/topology.py) gives each one's type, docs/implementing.md section 3 its meaning.
    """

    kind: ClassVar[str] = "start"
    topology: Topology


@dataclass(frozen=True)
class AdvanceTime(Command):
    kind: ClassVar[str] = "advance_time"


@dataclass(frozen=True)
class BeginDialog(Command):
    kind: ClassVar[str] = "begin_dialog"
    dialog: str
    instance: str
    database: str
    from_service: str
    to_service: str
    to_broker_instance: str | None = None


@dataclass(frozen=True)
class Send(Command):
    """SEND ON CONVERSATION: by the initiator, or by the target (a reply) when ``from_target``."""

    kind: ClassVar[str] = "send"
    dialog: str
    message_type: str = "DEFAULT"
    body: str = ""
    from_target: bool = False


@dataclass(frozen=True)
class BeginTransaction(Command):
    kind: ClassVar[str] = "begin_transaction"
    session: str


@dataclass(frozen=True)
class Commit(Command):
    kind: ClassVar[str] = "commit"
    session: str


@dataclass(frozen=True)
class Rollback(Command):
    kind: ClassVar[str] = "rollback"
    session: str


@dataclass(frozen=True)
class Receive(Command):
    """RECEIVE [TOP (top)] FROM queue [WHERE ...], inside WAITFOR when ``waitfor_ms`` is set. It returns the ready
    messages of one conversation group, the one it locks: at most ``top`` of them, fewer where that group has fewer,
    never any of a second group."""

    kind: ClassVar[str] = "receive"
    session: str
    queue: QueueRef
    top: int | None = None
    where_dialog: str | None = None
    where_group: str | None = None
    waitfor_ms: int | None = None


@dataclass(frozen=True)
class GetConversationGroup(Command):
    kind: ClassVar[str] = "get_conversation_group"
    session: str
    queue: QueueRef
    waitfor_ms: int | None = None


@dataclass(frozen=True)
class AlterQueue(Command):
    """ALTER QUEUE ... WITH ACTIVATION (...); a field left None is left unchanged."""

    kind: ClassVar[str] = "alter_queue"
    needs: ClassVar[str | None] = "activation"
    queue: QueueRef
    status: str | None = None
    procedure_name: str | None = None
    max_queue_readers: int | None = None


@dataclass(frozen=True)
class CreateEventNotification(Command):
    """CREATE EVENT NOTIFICATION name ON QUEUE queue FOR QUEUE_ACTIVATION."""

    kind: ClassVar[str] = "create_event_notification"
    needs: ClassVar[str | None] = "external_activation"
    name: str
    queue: QueueRef


@dataclass(frozen=True)
class DropEventNotification(Command):
    kind: ClassVar[str] = "drop_event_notification"
    needs: ClassVar[str | None] = "external_activation"
    name: str
    queue: QueueRef


@dataclass(frozen=True)
class ExitProcedure(Command):
    """The activated procedure started as ``task`` (1, 2, ... per queue) returns."""

    kind: ClassVar[str] = "exit_procedure"
    queue: QueueRef
    task: int


@dataclass(frozen=True)
class CreateRoute(Command):
    """CREATE ROUTE in ``database`` of ``instance`` (None: msdb). ``route`` holds name, service_name,
    broker_instance, address, mirror_address, lifetime_s - the plain form of topology routes."""

    kind: ClassVar[str] = "create_route"
    needs: ClassVar[str | None] = "routing"
    instance: str
    database: str | None
    route: Route


@dataclass(frozen=True)
class AlterRoute(Command):
    """ALTER ROUTE: the fields of ``route`` that are not None replace the route's."""

    kind: ClassVar[str] = "alter_route"
    needs: ClassVar[str | None] = "routing"
    instance: str
    database: str | None
    route: RouteChange


@dataclass(frozen=True)
class DropRoute(Command):
    kind: ClassVar[str] = "drop_route"
    needs: ClassVar[str | None] = "routing"
    instance: str
    database: str | None
    name: str


@dataclass(frozen=True)
class AnswerRoutingRequest(Command):
    """A dynamic routing service answers a pending request (RTM-4) by creating ``route``."""

    kind: ClassVar[str] = "answer_routing_request"
    needs: ClassVar[str | None] = "dynamic_routing"
    instance: str
    database: str | None
    route: Route


@dataclass(frozen=True)
class SetMessageForwarding(Command):
    """ALTER ENDPOINT ... FOR SERVICE_BROKER (MESSAGE_FORWARDING = ENABLED | DISABLED)."""

    kind: ClassVar[str] = "set_message_forwarding"
    needs: ClassVar[str | None] = "forwarding"
    instance: str
    active: bool


@dataclass(frozen=True)
class SetReachable(Command):
    """A fault: the instance stops answering the network, or answers again.

    Unreachable, the instance answers nothing that comes to it: other
    instances' connections to it break (each closed, reason `disconnected`,
    at once or when next used), their attempts to connect to it are refused,
    and a mirror probe of it gets `unreachable`. Its own connections to other
    instances stay open, and it may still open new ones and send over them:
    the fault is of answering, not of sending. Reachable again, it is
    connected to afresh; no connection the fault broke comes back by itself.
    """

    kind: ClassVar[str] = "set_reachable"
    needs: ClassVar[str | None] = "routing"
    instance: str
    reachable: bool


@dataclass(frozen=True)
class Failover(Command):
    """The copy of ``database`` on ``instance`` becomes the mirroring principal; its partner the mirror."""

    kind: ClassVar[str] = "failover"
    needs: ClassVar[str | None] = "mirroring"
    instance: str
    database: str


@dataclass(frozen=True)
class FailTaskHandlers(Command):
    """A fault: ``count`` task handlers of the instance fail (PER-1B restarts them)."""

    kind: ClassVar[str] = "fail_task_handlers"
    needs: ClassVar[str | None] = "periodic_tasks"
    instance: str
    count: int


@dataclass(frozen=True)
class SetDispatcherSaving(Command):
    """The dispatcher's async saving tasks: "running" (after ``delay_s``) or "stopped"."""

    kind: ClassVar[str] = "set_dispatcher_saving"
    needs: ClassVar[str | None] = "periodic_tasks"
    instance: str
    mode: str
    delay_s: float = 0


@dataclass(frozen=True)
class LoseInTransit(Command):
    """A fault: the network loses the next transmission of this message, or with ``every`` every one from now on.

    The transmission happens (``message_transmitted``) and is lost on the way (``message_lost_in_transit``): the
    message never arrives.

    ``every`` is for a broker that sends a message again while it has not arrived, which the documents neither
    ask nor forbid: its copies are lost too, so the message never arrives.
    """

    kind: ClassVar[str] = "lose_in_transit"
    needs: ClassVar[str | None] = "periodic_tasks"
    dialog: str
    sequence: int
    from_target: bool = False
    every: bool = False


@dataclass(frozen=True)
class DropConnection(Command):
    """A fault: the instance's connection to ``address`` drops."""

    kind: ClassVar[str] = "drop_connection"
    needs: ClassVar[str | None] = "periodic_tasks"
    instance: str
    address: str


@dataclass(frozen=True)
class FailTransmission(Command):
    """A fault: the transmitter cannot send the dialog for a "resource" or "security" reason.

    Each instance has its own transmitter, with which the dialogs it sends register: those of the dialog's two
    ends (one, when both ends are in one instance) both hold it. A message of the dialog that such a transmitter
    would send waits there, failed, until that instance's transmitter reclassifies the dialog (PER-2B: it "may also
    resume transmission of messages from dialogs that were unsuccessful earlier"); the other end's transmitter
    resumes it only when it reclassifies it in turn. Only what goes over the network is held: the transmitter "is
    the intermediate layer between the dialogs and the transport" (periodic tasks, every 2nd notification), so a
    message is routed first as any other (its `route_chosen`), a message routed LOCAL is delivered as if nothing
    had failed, and one routed to a network address waits failed (its `transmission_pending` naming the address).
    """

    kind: ClassVar[str] = "fail_transmission"
    needs: ClassVar[str | None] = "periodic_tasks"
    dialog: str
    reason: str


@dataclass(frozen=True)
class CreateMasterKey(Command):
    kind: ClassVar[str] = "create_master_key"
    needs: ClassVar[str | None] = "periodic_tasks"
    instance: str
    database: str


@dataclass(frozen=True)
class StopAckCleanup(Command):
    """A fault: the background task that cleans acknowledged messages out of the transmission queue stops."""

    kind: ClassVar[str] = "stop_ack_cleanup"
    needs: ClassVar[str | None] = "periodic_tasks"
    instance: str
    database: str


@dataclass(frozen=True)
class QueryView(Command):
    """SELECT * FROM one of the views of ``VIEWS``. sys.routes needs an instance, and a database (null: msdb's
    routes). Given an instance, sys.transmission_queue, sys.dm_broker_connections and the sbtck views show that
    instance's rows only; with null, every instance's. The other views always show every instance's rows (the kit
    names no instance for them)."""

    kind: ClassVar[str] = "query_view"
    result: ClassVar[type[Result]] = ViewResult
    view: str
    instance: str | None = None
    database: str | None = None


def _json(value: Any) -> Any:
    # a queue as its object of three names (JSON would write a named tuple as a list), a topology's struct as its object
    if isinstance(value, QueueRef):
        return value.fields()
    if isinstance(value, msgspec.Struct):
        return plain(value)
    return value


# every command of this module, by kind
COMMANDS: dict[str, type[Command]] = {cls.kind: cls for cls in Command.__subclasses__()}


class _Shape(NamedTuple):
    """A command's fields as its JSON is checked against them."""

    names: frozenset[str]  # every key its JSON may have, "kind" among them
    required: frozenset[str]
    defaults: dict[str, Any]
    takes_queue: bool
    # the fields that carry a topology or a route, by name, with the struct each is decoded as
    forms: dict[str, type[msgspec.Struct]]


def _shape(cls: type[Command]) -> _Shape:
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)
    return _Shape(
        frozenset(f.name for f in fields) | {"kind"},
        frozenset(f.name for f in fields if f.default is dataclasses.MISSING),
        {f.name: f.default for f in fields if f.default is not dataclasses.MISSING},
        any(f.name == "queue" for f in fields),
        {
            f.name: hints[f.name]
            for f in fields
            if isinstance(hints[f.name], type) and issubclass(hints[f.name], msgspec.Struct)
        },
    )


# looked up once per kind: a workload reads hundreds of commands per world
SHAPES: dict[str, _Shape] = {kind: _shape(cls) for kind, cls in COMMANDS.items()}
QUEUE_FIELDS = frozenset(QueueRef._fields)


def command_values(data: Any) -> dict[str, Any]:
    """A command's JSON checked as ``command_from_json`` checks it: its fields, defaults filled in, ``kind`` kept.

    What the reference runs a workload's commands from, without building the command: the values of
    ``command_from_json(data)``, each field by name, a queue as its ``QueueRef``, a topology or a route as its struct
    (sbtck/topology.py: where a command's topology is decoded).
    """
    if not isinstance(data, dict) or "kind" not in data:
        raise ContractError(f"a command is an object with a 'kind', got {data!r}")
    kind = data["kind"]
    shape = SHAPES.get(kind) if isinstance(kind, str) else None
    if shape is None:
        raise ContractError(f"unknown command kind {kind!r}; known: {', '.join(sorted(COMMANDS))}")
    if not shape.names.issuperset(data):
        unknown = set(data) - shape.names
        raise ContractError(f"command {kind!r} has no field(s) {', '.join(sorted(map(str, unknown)))}")
    if not shape.required <= data.keys():
        missing = sorted(shape.required - data.keys())
        raise ContractError(f"command {kind!r}: missing field(s) {', '.join(missing)}")
    values = {**shape.defaults, **data}
    if shape.takes_queue:
        queue = values["queue"]
        if not isinstance(queue, dict) or queue.keys() != QUEUE_FIELDS:
            raise ContractError(f"command {kind!r}: queue is an object of {', '.join(QueueRef._fields)}, got {queue!r}")
        values["queue"] = QueueRef(**queue)
    if shape.forms:
        for name, form in shape.forms.items():
            values[name] = decode(values[name], form, f"command {kind!r}: {name}")
    return values


def command_from_json(data: Any) -> Command:
    values = command_values(data)
    return COMMANDS[values.pop("kind")](**values)


# The latest time a command may carry: the end of the year 9999, in epoch milliseconds.
LATEST_MS = 253_402_300_799_999
_JSON_TYPES: dict[Any, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def _accepts(hint: Any, value: Any) -> bool:
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType):
        return any(_accepts(option, value) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if hint is QueueRef:
        return isinstance(value, QueueRef) and all(isinstance(part, str) for part in value)
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return isinstance(value, hint)  # decoded, its fields checked, by command_values
    if isinstance(value, bool) and hint is not bool:
        return False  # JSON's true is no number
    return isinstance(value, _JSON_TYPES.get(hint, (hint,)))


@functools.cache
def _hints(kind: str) -> dict[str, Any]:
    fields = {f.name for f in dataclasses.fields(COMMANDS[kind])}
    return {name: hint for name, hint in typing.get_type_hints(COMMANDS[kind]).items() if name in fields}


def typed_command(data: Any) -> Command:
    """A command from JSON whose every field has its declared type, and whose time is a whole millisecond up to
    LATEST_MS: what a server takes from a client it does not trust (``command_from_json`` trusts the kit)."""
    values = command_values(data)
    kind = values.pop("kind")
    cls = COMMANDS[kind]
    for name, hint in _hints(kind).items():
        if not _accepts(hint, values[name]):
            raise ContractError(f"command {kind!r}: {name} is {_named(hint)}, got {reprlib.repr(values[name])}")
    if not 0 <= values["at_ms"] <= LATEST_MS:
        raise ContractError(
            f"command {kind!r}: at_ms is from 0 to {LATEST_MS} (the end of the year 9999), got {values['at_ms']}"
        )
    return cls(**values)


def _named(hint: Any) -> str:
    if isinstance(hint, types.UnionType):
        return " or ".join(_named(option) for option in typing.get_args(hint))
    names = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", type(None): "null"}
    if typing.get_origin(hint) is dict or (isinstance(hint, type) and issubclass(hint, msgspec.Struct)):
        return "an object"
    return names.get(hint) or "an object of instance, database and queue, strings"


# not frozen: a frozen dataclass sets each field through object.__setattr__, four times the cost of building an
# event, and a broker builds one for everything it does; nothing in the kit changes an event once made
@dataclass(slots=True)
class Event:
    """An observation: something the implementation did at ``at_ms``."""

    at_ms: int
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"at_ms": self.at_ms, "kind": self.kind, **self.fields}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        rest = {k: v for k, v in data.items() if k not in ("at_ms", "kind")}
        return cls(int(data["at_ms"]), str(data["kind"]), rest)


@dataclass
class Response:
    """The answer to one command: a result, or the reason it was refused, and the events since the last one."""

    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Handshake:
    name: str
    version: str
    protocol: str = PROTOCOL_VERSION
    capabilities: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
