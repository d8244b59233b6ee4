"""Every kind of event an implementation reports, declared once.

The engine emits them, the steps, invariants, differential check and report
read them by these names; a feature's log table writes a kind with spaces
(``message arrived``). Each ``Kind.X`` is the kind as the wire spells it, a
plain string: a class of constants rather than an Enum, whose members Python
3.11 looks up some five times slower (through EnumType.__getattr__), and the
engine names a kind for every event it writes. ``KINDS`` lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final


class Kind:
    # the broker and its databases
    BROKER_STARTED: Final = "broker_started"
    DATABASE_BROKER_STARTED: Final = "database_broker_started"
    DATABASE_BROKER_START_FAILED: Final = "database_broker_start_failed"
    MASTER_KEY_CREATED: Final = "master_key_created"
    # queues, monitors and activation
    QUEUE_ALTERED: Final = "queue_altered"
    MONITOR_CREATED: Final = "monitor_created"
    MONITOR_REMOVED: Final = "monitor_removed"
    ACTIVATION_NECESSARY: Final = "activation_necessary"
    ACTIVATION_WITHHELD: Final = "activation_withheld"
    ACTIVATION_TIME_OUT: Final = "activation_time_out"
    PROCEDURE_STARTED: Final = "procedure_started"
    PROCEDURE_EXITED: Final = "procedure_exited"
    EVENT_NOTIFICATION: Final = "event_notification"
    # sessions
    ROWS_RETURNED: Final = "rows_returned"
    EMPTY_RESULT: Final = "empty_result"
    READER_WAITING: Final = "reader_waiting"
    TRANSACTION_COMMITTED: Final = "transaction_committed"
    TRANSACTION_ROLLED_BACK: Final = "transaction_rolled_back"
    # dialogs and messages
    DIALOG_BEGUN: Final = "dialog_begun"
    MESSAGE_SENT: Final = "message_sent"
    MESSAGE_ARRIVED: Final = "message_arrived"
    ACKNOWLEDGED: Final = "acknowledged"
    MESSAGE_DROPPED: Final = "message_dropped"
    # routing
    ROUTE_CREATED: Final = "route_created"
    ROUTE_ALTERED: Final = "route_altered"
    ROUTE_DROPPED: Final = "route_dropped"
    ROUTES_MATCHED: Final = "routes_matched"
    ROUTE_CHOSEN: Final = "route_chosen"
    ROUTING_REQUESTED: Final = "routing_requested"
    CONVERSATION_DELAYED: Final = "conversation_delayed"
    ROUTING_RETRIED: Final = "routing_retried"
    REPLY_RECOGNISED: Final = "reply_recognised"
    MESSAGE_FORWARDING: Final = "message_forwarding"  # forwarding switched on or off
    MESSAGE_FORWARDED: Final = "message_forwarded"
    FORWARDED_MESSAGE_DELETED: Final = "forwarded_message_deleted"
    PRINCIPAL_PROBE: Final = "principal_probe"
    PRINCIPAL_LOST: Final = "principal_lost"
    MIRRORING_FAILOVER: Final = "mirroring_failover"
    INSTANCE_REACHABLE: Final = "instance_reachable"
    INSTANCE_UNREACHABLE: Final = "instance_unreachable"
    # the transport, the transmitter and the dispatcher
    MESSAGE_TRANSMITTED: Final = "message_transmitted"
    MESSAGE_LOST_IN_TRANSIT: Final = "message_lost_in_transit"
    TRANSMISSION_PENDING: Final = "transmission_pending"
    TRANSMITTER_RECLASSIFIED: Final = "transmitter_reclassified"
    CONNECTION_ATTEMPT: Final = "connection_attempt"
    CONNECTION_CLOSED: Final = "connection_closed"
    DISPATCHER_BUFFERED: Final = "dispatcher_buffered"
    DISPATCHER_SAVING: Final = "dispatcher_saving"
    DISPATCHER_DELETED: Final = "dispatcher_deleted"
    # the periodic tasks
    TIMER_NOTIFICATION: Final = "timer_notification"
    TASK_HANDLERS_STARTED: Final = "task_handlers_started"
    TASK_HANDLERS_FAILED: Final = "task_handlers_failed"
    TASK_HANDLERS_RESTARTED: Final = "task_handlers_restarted"
    BROKER_CONFIGURATION_NOTIFICATION: Final = "broker_configuration_notification"
    ACK_CLEANUP_STOPPED: Final = "ack_cleanup_stopped"
    ACK_CLEANUP_RESUMED: Final = "ack_cleanup_resumed"


# every kind, as the wire spells it
KINDS: tuple[str, ...] = tuple(value for name, value in vars(Kind).items() if name.isupper())


class Trigger:
    """What made a queue monitor look (ACT-05): the ``trigger`` of activation_necessary."""

    ARRIVAL: Final = "message arrived"
    RECEIVE: Final = "RECEIVE"
    ROLLBACK: Final = "rollback"
    ALL_EXITED: Final = "all procedures exited"
    ALTER: Final = "ALTER QUEUE"
    TIMER: Final = "timer notification"
    TIME_OUT: Final = "external activation time-out"


# How a field is compared, one class for each field of each kind (sbtck/agreement.py compares by it):
EXACT = "exact"  # equal values; a closed set of strings is listed in full (Field.values)
RELATIVE = "relative"  # an identity the implementation picks: compared by what it refers to, never by number
TIME = "time"  # an instant of the kit's clock
FREE_TEXT = "free text"  # said for a reader, never compared
REASONING = "reasoning"  # only with decision_trace; there any rule applying at that instant is accepted
CLASSES = (EXACT, RELATIVE, TIME, FREE_TEXT, REASONING)

# What an event is: an observable EFFECT (a message delivered, dropped, forwarded; a procedure started; a
# connection attempted; a notification sent; a command's result), or a REPORT about the broker's progress.
EFFECT, REPORT = "effect", "report"

# The capabilities an implementation declares when it reports a kind (all of them; none: every implementation).
# The workload stage compares an implementation's events only of the kinds its capabilities cover.
ACTIVATION, EXTERNAL, ROUTING, PERIODIC = "activation", "external_activation", "routing", "periodic_tasks"
FORWARDING, MIRRORING, DYNAMIC = "forwarding", "mirroring", "dynamic_routing"
# The model's reasoning rather than what a broker shows (no T-SQL result, catalog view, DMV, event notification
# or trace event class of Service Broker carries it): reported only by an implementation declaring it.
TRACE = "decision_trace"


@dataclass(frozen=True)
class Field:
    """One field of an event: its JSON type, how it is compared, what it says, and why where the class is a choice."""

    name: str
    type: str
    compared: str
    meaning: str
    values: tuple[str, ...] | None = None  # the complete set of an exact (or reasoning) string field
    why: str = ""
    # a list whose members name things the documents let either side name: compared by how many there are
    by_number: bool = False
    # the form of a string the kit makes of the scenario's names (NAME stands for one), where it is not one of them
    form: str = ""

    def but(self, **changes: Any) -> Field:
        return replace(self, **changes)


@dataclass(frozen=True)
class Record:
    """Everything the kit says about one event kind."""

    kind: str
    fields: tuple[Field, ...]
    area: tuple[str, ...]  # the capabilities an implementation reports it with (all of them)
    nature: str  # EFFECT or REPORT
    # a report only: when it is reported, in words an implementer can follow; None: its presence and moment are
    # not compared (the documents do not say when a broker reports it)
    moment: str | None = None
    evidences: str | None = None  # the rule it speaks for when its own fields (rule, step) name none
    # an echo of the kit's own fault: the kit knows when it made handlers fail, stopped a clean-up, created a
    # master key or cut the network, so no scenario asks an implementation to repeat it; reporting it is optional
    echo: bool = False
    may_omit: str = ""  # why the documents leave reporting it to the implementation (where the reference does)
    first_required: tuple[str, ...] = ()  # required the first time for these fields' values, later optional
    may_report_at_start: bool = False  # may be reported at start for what starts then, or not
    either_moment: str = ""  # the two moments it may be reported at, neither of which the documents name
    # a report of what one instant came to, not of each look that found it: several alike at one queue in one
    # instant are one (why, in words an implementer can follow; "" for a kind counted one for one)
    once_an_instant: str = ""
    way: str = ""  # how a message-sequence picture shows it on the message's way

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def compared_always(self) -> bool:
        """Are its presence and moment compared? Effects always; a report only where its moment is stated."""
        return self.nature == EFFECT or self.moment is not None


def _f(name: str, type: str, compared: str, meaning: str, **more: Any) -> Field:
    return Field(name, type, compared, meaning, **more)


# The fields, each declared once; a kind whose field differs says so with ``but``.
INSTANCE = _f("instance", "string", EXACT, "the instance the event happened on")
DATABASE = _f("database", "string", EXACT, "a database of the instance")
QUEUE = _f("queue", "string", EXACT, "a queue of the database")
DIALOG = _f("dialog", "string", EXACT, "the dialog, as the scenario named it")
FROM_TARGET = _f(
    "from_target", "boolean", EXACT, "whether the message goes from the target back to the initiator (a reply)"
)
NUMBER_IN_DIALOG = _f(
    "message_sequence_number", "integer", EXACT, "the message's number in its dialog and direction, from 0"
)
MESSAGE = (DIALOG, FROM_TARGET, INSTANCE, NUMBER_IN_DIALOG)
ADDRESS = _f(
    "address",
    "string",
    EXACT,
    "a network address, TCP://host:port, as the route or connection names it",
    why="compared without case: the documents give host names none",
)
# RTM-6 matches no route of the table: the message is routed as by a LOCAL route, named so (implementing.md)
AS_IF_LOCAL = "NAME or (as if LOCAL)"
ROUTE = _f("route", "string", EXACT, "a route's name")
RULE = _f(
    "rule",
    "string",
    REASONING,
    "the catalogue rule that decided (ACT-06, RTC-5, ...)",
    why="a rule id of spec/rules.yaml; which rule decided is the model's reasoning, not what a broker shows",
)
STEP = _f(
    "step",
    "string",
    REASONING,
    "the routing step that decided (RTM-1..8, RTC-1..4)",
    why="a rule id of spec/rules.yaml; which step decided is the model's reasoning, not what a broker shows",
)
SESSION = _f(
    "session",
    "string",
    EXACT,
    "the session, as the scenario named it; an activated task's session is QUEUE#N",
    form="NAME or QUEUE#N",
)
TASK = _f("task", "integer", EXACT, "the activated task's number for its queue, from 1", why="exit_procedure names it")
SPID = _f(
    "spid",
    "integer",
    RELATIVE,
    "the session id, from 51",
    why='the documents say only "from 51": an implementation numbers its sessions as it likes, so a spid is'
    " compared by the activated task it belongs to",
)
GROUP = _f(
    "conversation_group",
    "string",
    RELATIVE,
    "the conversation group of the message, of the rows, or the one GET CONVERSATION GROUP locked",
    why="a broker names its groups as it likes (a GUID): only which messages share a group is compared",
)
COUNT = _f("count", "integer", EXACT, "how many task handlers")
STATEMENT = _f("statement", "string", EXACT, "the statement that was run", values=("RECEIVE", "GET CONVERSATION GROUP"))
HAS_WHERE = _f("has_where", "boolean", EXACT, "whether the RECEIVE has a WHERE clause")
ROWS = _f(
    "rows",
    "list",
    EXACT,
    "the rows a RECEIVE returned: objects with dialog and"
    " message_sequence_number, and conversation_group if you like (any other column is yours); GET CONVERSATION"
    " GROUP returns none: leave it out or give an empty list",
    why="a row is compared by dialog and message_sequence_number, the fields the contract declares for it; the"
    " rows' group by what it holds, as the event's when the event names none; any other column of a row"
    " (message_body, message_type_name) is the implementation's own and never compared",
)
STATEMENT_RESULT = (GROUP, DATABASE, HAS_WHERE, INSTANCE, QUEUE, ROWS, SESSION, STATEMENT)
BROKER_INSTANCE = _f("broker_instance", "string", EXACT, "a broker instance GUID, as the topology declares it")
TABLE = _f(
    "table",
    "string",
    EXACT,
    "the route table used: msdb.sys.routes or DATABASE.sys.routes",
    form="msdb.sys.routes or NAME.sys.routes",
)
ANSWER = _f(
    "answer",
    "string",
    EXACT,
    "what a mirroring partner said when asked",
    values=("principal", "not principal", "unreachable"),
)


def _reason(*values: str) -> Field:
    return _f("reason", "string", EXACT, "why: one of a few", values=values)


PLACE = (DATABASE, INSTANCE)
AT_QUEUE = (DATABASE, INSTANCE, QUEUE)
# Several triggers of one instant (a new message, the RECEIVE that waited for it and returns it, a timer
# notification) each make the monitor look, and what each look finds depends on the order they come in, which the
# documents do not give (ACT-05 lists the triggers, no order): how many looks came to the same finding is no fact
# about the broker
_LOOKS_OF_AN_INSTANT = (
    "several alike at one queue in one instant are one: how many of the instant's looks find it depends on the"
    " order of its triggers, which ACT-05 does not give"
)
TRIGGERS = tuple(v for k, v in vars(Trigger).items() if k.isupper())
WAITING_STATUS = _f(
    "status",
    "string",
    FREE_TEXT,
    "why the message waits in the transmission queue",
    why="no document defines these words, and a real SQL Server's transmission_status is an error description; "
    "never compared, but without a decision trace an address in it (`TCP://...`) tells the randomized stage's "
    "search where the message waits for a connection, and without one the search may run out of budget there "
    "(docs/implementing.md, which route)",
)
PENDING_ADDRESS = _f(
    "address",
    "string or null",
    EXACT,
    "the address the message waits for a connection to, or failed to reach; null where it waits for no address",
    why="optional (2.3): without a decision trace it tells the randomized stage's search where the message was "
    "routed, as an address in `status` did before it (docs/implementing.md, which route)",
)

# The periodic tasks as a timer_notification lists them, in the order they run (PER-1A .. PER-5E).
PERIODIC_TASKS = (
    "queue monitors",
    "task handlers",
    "message dispatcher",
    "transport connections",
    "transmitter",
    "idle connections",
    "forwarder",
    "broker start",
    "broker configuration notification",
    "acknowledged message clean-up",
)

RECORDS: dict[str, Record] = {
    r.kind: r
    for r in (
        # the broker and its databases
        Record(Kind.BROKER_STARTED, (), (), EFFECT),
        Record(Kind.DATABASE_BROKER_STARTED, PLACE, (PERIODIC,), EFFECT, evidences="PER-5C", may_report_at_start=True),
        Record(
            Kind.DATABASE_BROKER_START_FAILED,
            (*PLACE, _reason("missing master key")),
            (PERIODIC,),
            REPORT,
            moment="when the database's broker fails to start, at start and at each later try (PER-5C)",
            evidences="PER-5C",
            first_required=("instance", "database"),
        ),
        Record(Kind.MASTER_KEY_CREATED, PLACE, (PERIODIC,), EFFECT, echo=True),
        # queues, monitors and activation
        Record(Kind.QUEUE_ALTERED, AT_QUEUE, (ACTIVATION,), EFFECT),
        Record(Kind.MONITOR_CREATED, AT_QUEUE, (ACTIVATION,), EFFECT, evidences="ACT-02"),
        Record(Kind.MONITOR_REMOVED, AT_QUEUE, (ACTIVATION,), EFFECT, evidences="ACT-02"),
        Record(
            Kind.ACTIVATION_NECESSARY,
            (
                *AT_QUEUE,
                RULE,
                _f(
                    "trigger",
                    "string",
                    REASONING,
                    "what made the queue monitor look",
                    values=TRIGGERS,
                    why="which of two coinciding triggers is named is the model's reasoning: an arrival and a timer"
                    " notification at one instant are both accepted (ACT-06 or ACT-07)",
                ),
            ),
            (ACTIVATION, TRACE),
            REPORT,
            moment="in the instant the queue monitor finds activation necessary (ACT-06, ACT-07)",
            evidences="ACT-05",
            once_an_instant=_LOOKS_OF_AN_INSTANT,
        ),
        Record(
            Kind.ACTIVATION_WITHHELD,
            (*AT_QUEUE, _reason("MAX_QUEUE_READERS", "notification time-out")),
            (ACTIVATION, TRACE),
            REPORT,
            moment="in the instant activation is necessary and the monitor starts nothing (ACT-10, ACT-12)",
            evidences="ACT-10",
            once_an_instant=_LOOKS_OF_AN_INSTANT,
        ),
        Record(
            Kind.ACTIVATION_TIME_OUT,
            AT_QUEUE,
            (EXTERNAL,),
            REPORT,
            moment="when the external activation time-out after a QUEUE_ACTIVATION notification runs out (ACT-12);"
            " not when a RECEIVE ends it first (ACT-13), which nothing reports",
            evidences="ACT-12",
        ),
        Record(
            Kind.PROCEDURE_STARTED,
            (
                *PLACE,
                _f("procedure_name", "string", EXACT, "the activation stored procedure started"),
                QUEUE,
                SPID,
                TASK,
            ),
            (ACTIVATION,),
            EFFECT,
            evidences="ACT-05",
        ),
        Record(
            Kind.PROCEDURE_EXITED,
            (*AT_QUEUE, _reason("empty RECEIVE", "exited"), SPID, TASK),
            (ACTIVATION,),
            EFFECT,
            evidences="ACT-05",
        ),
        Record(
            Kind.EVENT_NOTIFICATION,
            (
                DATABASE,
                _f("event_type", "string", EXACT, "the event notification's event type", values=("QUEUE_ACTIVATION",)),
                INSTANCE,
                _f("notification", "string", EXACT, "the event notification's name"),
                QUEUE,
            ),
            (EXTERNAL,),
            EFFECT,
            evidences="ACT-12",
        ),
        # sessions
        Record(Kind.ROWS_RETURNED, STATEMENT_RESULT, (), EFFECT, evidences="ACT-09"),
        Record(Kind.EMPTY_RESULT, STATEMENT_RESULT, (), EFFECT, evidences="ACT-07"),
        Record(Kind.READER_WAITING, (DATABASE, HAS_WHERE, INSTANCE, QUEUE, SESSION, STATEMENT), (), EFFECT),
        Record(Kind.TRANSACTION_COMMITTED, (SESSION,), (), EFFECT),
        Record(
            Kind.TRANSACTION_ROLLED_BACK,
            (_f("returned", "integer", EXACT, "how many messages a rollback put back on their queues"), SESSION),
            (),
            EFFECT,
        ),
        # dialogs and messages
        Record(
            Kind.DIALOG_BEGUN,
            (
                DATABASE,
                DIALOG,
                _f("from_service", "string", EXACT, "the initiating service"),
                INSTANCE,
                _f(
                    "to_broker_instance",
                    "string or null",
                    EXACT,
                    "the broker instance the dialog was begun to, or null",
                ),
                _f("to_service", "string", EXACT, "the target service"),
            ),
            (),
            EFFECT,
        ),
        Record(Kind.MESSAGE_SENT, (DATABASE, *MESSAGE), (), EFFECT, way="sent"),
        Record(
            Kind.MESSAGE_ARRIVED,
            (GROUP, DATABASE, *MESSAGE, QUEUE, _f("service", "string", EXACT, "a service's name")),
            (),
            EFFECT,
            evidences="RTL-1",
            way="arrived",
        ),
        Record(Kind.ACKNOWLEDGED, (BROKER_INSTANCE, DIALOG, INSTANCE), (ROUTING,), EFFECT, evidences="RTE-04"),
        Record(
            Kind.MESSAGE_DROPPED,
            (
                *MESSAGE,
                _f(
                    "reason",
                    "string",
                    FREE_TEXT,
                    "why, in words",
                    why="no document names the words; the rule says which drop it is",
                ),
                RULE,
            ),
            (ROUTING,),
            EFFECT,
            way="dropped",
        ),
        # routing
        Record(Kind.ROUTE_CREATED, (DATABASE, INSTANCE, ROUTE), (ROUTING,), EFFECT),
        Record(Kind.ROUTE_ALTERED, (DATABASE, INSTANCE, ROUTE), (ROUTING,), EFFECT),
        Record(Kind.ROUTE_DROPPED, (DATABASE, INSTANCE, ROUTE), (ROUTING,), EFFECT),
        Record(
            Kind.ROUTES_MATCHED,
            (
                BROKER_INSTANCE.but(
                    compared=FREE_TEXT,
                    meaning="the broker instance matching looked for, if any",
                    why="no document says what a broker instance matching looked for holds",
                ),
                *MESSAGE,
                _f(
                    "routes",
                    "list",
                    EXACT,
                    "the routes that matched (list)",
                    why="a set: the documents give no order",
                    form=AS_IF_LOCAL,
                ),
                STEP,
                TABLE,
            ),
            (ROUTING, TRACE),
            REPORT,
            evidences="RTM-0",
        ),
        Record(
            Kind.ROUTE_CHOSEN,
            (
                _f(
                    "candidates",
                    "list",
                    EXACT,
                    "the routes the choice was made among (list)",
                    by_number=True,
                    form=AS_IF_LOCAL,
                    why="which member names a group of identical routes is open (RTC-0): compared by their number",
                ),
                *MESSAGE,
                ROUTE.but(form=AS_IF_LOCAL),
                STEP,
            ),
            (ROUTING, TRACE),
            REPORT,
            moment="each time routing chooses a route for a message, in the instant it does (RTC-1..4)",
            evidences="RTC-0",
        ),
        Record(
            Kind.ROUTING_REQUESTED,
            (*MESSAGE, ROUTE, _f("service", "string", EXACT, "a service's name"), TABLE),
            (DYNAMIC,),
            EFFECT,
            evidences="RTM-4",
        ),
        Record(Kind.CONVERSATION_DELAYED, (*MESSAGE, STEP), (ROUTING,), REPORT, evidences="RTM-8"),
        Record(Kind.ROUTING_RETRIED, MESSAGE, (ROUTING,), REPORT, evidences="RTM-8"),
        Record(
            Kind.REPLY_RECOGNISED,
            (BROKER_INSTANCE, *MESSAGE),
            (ROUTING,),
            REPORT,
            moment="when the initiator's instance takes in a reply naming the target's broker instance (RTE-05)",
            evidences="RTE-05",
        ),
        Record(
            Kind.MESSAGE_FORWARDING,
            (_f("active", "boolean", EXACT, "whether message forwarding is now on"), INSTANCE),
            (FORWARDING,),
            EFFECT,
            echo=True,
        ),
        Record(
            Kind.MESSAGE_FORWARDED,
            (
                ADDRESS,
                DIALOG,
                FROM_TARGET,
                _f("hops", "integer", EXACT, "how many times the message has been forwarded"),
                INSTANCE,
                NUMBER_IN_DIALOG,
            ),
            (FORWARDING,),
            EFFECT,
            evidences="RTX-1",
            either_moment="when sent on, or already when decided for a message that waits for its connection",
            way="forwarded",
        ),
        # the forwarder's own clean-up (PER-5B)
        Record(Kind.FORWARDED_MESSAGE_DELETED, MESSAGE, (FORWARDING,), EFFECT, evidences="PER-5B", way="deleted"),
        Record(Kind.PRINCIPAL_PROBE, (ADDRESS, ANSWER, *MESSAGE, ROUTE), (MIRRORING,), EFFECT, evidences="RTR-3"),
        Record(
            Kind.PRINCIPAL_LOST,
            (ADDRESS, ANSWER, *MESSAGE, ROUTE),
            (MIRRORING,),
            REPORT,
            moment="in the instant a partner taken for the principal answers otherwise, or cannot be reached (RTR-4)",
            evidences="RTR-4",
        ),
        Record(Kind.MIRRORING_FAILOVER, PLACE, (MIRRORING,), EFFECT, evidences="RTR-4", echo=True),
        Record(Kind.INSTANCE_REACHABLE, (INSTANCE,), (ROUTING,), EFFECT, echo=True),
        Record(Kind.INSTANCE_UNREACHABLE, (INSTANCE,), (ROUTING,), EFFECT, echo=True),
        # the transport, the transmitter and the dispatcher
        Record(
            Kind.MESSAGE_TRANSMITTED,
            (ADDRESS, *MESSAGE, _f("to_instance", "string", EXACT, "the instance the message was transmitted to")),
            (ROUTING,),
            EFFECT,
            evidences="PER-2A",
            way="transmitted",
        ),
        Record(Kind.MESSAGE_LOST_IN_TRANSIT, (ADDRESS, *MESSAGE), (ROUTING, PERIODIC), EFFECT, echo=True, way="lost"),
        Record(
            Kind.TRANSMISSION_PENDING,
            (*MESSAGE, WAITING_STATUS, PENDING_ADDRESS),
            (ROUTING, PERIODIC),
            REPORT,
            evidences="PER-2B",
        ),
        Record(
            Kind.TRANSMITTER_RECLASSIFIED,
            (_f("dialogs", "list", EXACT, "the dialogs the transmitter registered again (list)"), INSTANCE),
            (ROUTING, PERIODIC, TRACE),
            REPORT,
            moment="at each run of the transmitter's periodic task (every 2nd timer notification, PER-2B), naming"
            " the dialogs it registered again (a failed dialog it resumes among them, whether or not a message of"
            " it waits), none as an empty list",
            evidences="PER-2B",
        ),
        Record(
            Kind.CONNECTION_ATTEMPT,
            (
                ADDRESS,
                INSTANCE,
                _f("result", "string", EXACT, "how a connection attempt ended", values=("connected", "refused")),
            ),
            (ROUTING, PERIODIC),
            EFFECT,
            evidences="PER-2A",
        ),
        Record(
            Kind.CONNECTION_CLOSED,
            (ADDRESS, INSTANCE, _reason("idle", "disconnected")),
            (ROUTING, PERIODIC),
            EFFECT,
            evidences="PER-5A",
        ),
        # where a message that came over the transport is
        Record(
            Kind.DISPATCHER_BUFFERED,
            (
                DATABASE.but(
                    meaning="the database of the instance the message is for: routed on this instance (RTL-1..3)"
                    " before its dispatcher buffers it"
                ),
                *MESSAGE,
            ),
            (ROUTING,),
            EFFECT,
            evidences="PER-1C",
            way="buffered",
        ),
        Record(
            Kind.DISPATCHER_SAVING,
            (
                _f("delay_s", "number", EXACT, "seconds the dispatcher waits before saving a message"),
                INSTANCE,
                _f("mode", "string", EXACT, "how the dispatcher saves messages", values=("running", "stopped")),
            ),
            (ROUTING, PERIODIC),
            EFFECT,
            echo=True,
        ),
        # a message undeliverable (stale or out of order) is dropped
        Record(
            Kind.DISPATCHER_DELETED,
            (DATABASE, *MESSAGE, _reason("out of order", "stale")),
            (ROUTING,),
            EFFECT,
            evidences="PER-1C",
            way="deleted",
        ),
        # the periodic tasks
        Record(
            Kind.TIMER_NOTIFICATION,
            (
                INSTANCE,
                _f("number", "integer", EXACT, "the timer notification's number, from 1 at broker start"),
                _f(
                    "tasks",
                    "list",
                    EXACT,
                    "the periodic tasks the timer notification ran, in order (list)",
                    values=PERIODIC_TASKS,
                ),
            ),
            (PERIODIC, TRACE),
            REPORT,
            moment="at every timer notification of the instance, from broker start (PER-0)",
            evidences="PER-0",
        ),
        Record(Kind.TASK_HANDLERS_STARTED, (COUNT, INSTANCE), (PERIODIC,), EFFECT, evidences="PER-1B"),
        Record(Kind.TASK_HANDLERS_FAILED, (COUNT, INSTANCE), (PERIODIC,), EFFECT, echo=True),
        Record(Kind.TASK_HANDLERS_RESTARTED, (COUNT, INSTANCE), (PERIODIC,), EFFECT, evidences="PER-1B"),
        Record(
            Kind.BROKER_CONFIGURATION_NOTIFICATION,
            (INSTANCE,),
            (PERIODIC,),
            EFFECT,
            evidences="PER-5D",
            # PER-5D fires the Broker Configuration Notification "for BCN clients", and the topologies name none
            may_omit="the topologies name no BCN clients",
        ),
        Record(Kind.ACK_CLEANUP_STOPPED, PLACE, (PERIODIC,), EFFECT, echo=True),
        Record(Kind.ACK_CLEANUP_RESUMED, PLACE, (PERIODIC,), EFFECT, evidences="PER-5E"),
    )
}


def record(kind: str) -> Record | None:
    """The record of KIND, or None for a kind the kit does not declare."""
    return RECORDS.get(kind)


def reported_by(kind: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Does an implementation with these capabilities report events of this kind?"""
    r = RECORDS.get(kind)
    if r is None:  # a kind the kit does not declare: nothing to compare it with
        return False
    return all(capability in capabilities for capability in r.area)


# What the records say, read across the kinds (derived here, never written again).
FIELDS: dict[str, tuple[str, ...]] = {k: r.field_names for k, r in RECORDS.items()}
AREA: dict[str, tuple[str, ...]] = {k: r.area for k, r in RECORDS.items()}
EVIDENCES: dict[str, str] = {k: r.evidences for k, r in RECORDS.items() if r.evidences}
ECHOES = frozenset(k for k, r in RECORDS.items() if r.echo)
MAY_OMIT = frozenset(k for k, r in RECORDS.items() if r.may_omit)
FIRST_REQUIRED: dict[str, tuple[str, ...]] = {k: r.first_required for k, r in RECORDS.items() if r.first_required}
MAY_REPORT_AT_START = frozenset(k for k, r in RECORDS.items() if r.may_report_at_start)
ONCE_AN_INSTANT = frozenset(k for k, r in RECORDS.items() if r.once_an_instant)
# the reports whose presence and moment no document states: never held against an implementation
MOMENT_OPEN = frozenset(k for k, r in RECORDS.items() if not r.compared_always)
# The kinds that are the engine's reasoning: which activation it found necessary or withheld, which routes
# matched and which it chose, the ticks of its timer, the transmitter's re-registrations.
DECISION_TRACE = frozenset(k for k, r in RECORDS.items() if TRACE in r.area)
# Fields that are reasoning although their kind is observable: the rule or routing step that decided.
DECISION_FIELDS = frozenset(f.name for r in RECORDS.values() for f in r.fields if f.compared == REASONING)
RULE_FIELDS = ("rule", "step")
# A field compared as free text anywhere: the same name means one thing in every kind
FREE = frozenset((k, f.name) for k, r in RECORDS.items() for f in r.fields if f.compared == FREE_TEXT)
# the closed value sets of fields that share them across kinds (``reason`` differs by kind: ``values_of``)
VALUES: dict[str, tuple[str, ...]] = {
    f.name: f.values for r in RECORDS.values() for f in r.fields if f.values and f.name != "reason"
}
# the fields whose value is a list (of a closed set's members, where VALUES has them)
LISTS = frozenset(f.name for r in RECORDS.values() for f in r.fields if f.type == "list")
REASONS: dict[str, tuple[str, ...]] = {
    k: f.values for k, r in RECORDS.items() for f in r.fields if f.name == "reason" and f.values
}
# Every field an event may carry, and what it says; at_ms (epoch milliseconds) and kind are on every event.
FIELD_MEANINGS: dict[str, str] = {}
for _record in RECORDS.values():
    for _field in _record.fields:
        FIELD_MEANINGS.setdefault(_field.name, _field.meaning)


def values_of(kind: str, name: str) -> tuple[str, ...] | None:
    """The complete value set of field NAME of KIND, where it is closed."""
    r = RECORDS.get(kind)
    f = r.field(name) if r else None
    return f.values if f else None
