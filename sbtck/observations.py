"""Every kind of event an implementation reports, declared once.

The engine emits them, the steps, invariants, differential check and report
read them by these names; a feature's log table writes a kind with spaces
(``message arrived``). Each ``Kind.X`` is the kind as the wire spells it, a
plain string: a class of constants rather than an Enum, whose members Python
3.11 looks up some five times slower (through EnumType.__getattr__), and the
engine names a kind for every event it writes. ``KINDS`` lists them all.
"""

from __future__ import annotations

from typing import Final


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

    MESSAGE_ARRIVED: Final = "message arrived"
    RECEIVE: Final = "RECEIVE"
    ROLLBACK: Final = "rollback"
    ALL_EXITED: Final = "all procedures exited"
    ALTER_QUEUE: Final = "ALTER QUEUE"
    TIMER_NOTIFICATION: Final = "timer notification"
    TIME_OUT: Final = "external activation time-out"


# The fields whose values are a closed set; ``rule`` and ``step`` are rule ids of spec/rules.yaml.
VALUES: dict[str, tuple[str, ...]] = {
    "trigger": tuple(v for k, v in vars(Trigger).items() if k.isupper()),
    "answer": ("principal", "not principal", "unreachable"),
    "result": ("connected", "refused"),
    "statement": ("RECEIVE", "GET CONVERSATION GROUP"),
}
RULE_FIELDS = ("rule", "step")


# The capabilities an implementation declares when it reports a kind (all of them; none: every implementation).
# The workload stage compares an implementation's events only of the kinds its capabilities cover.
ACTIVATION, EXTERNAL, ROUTING, PERIODIC = "activation", "external_activation", "routing", "periodic_tasks"
# The model's reasoning rather than what a broker shows (no T-SQL result, catalog view, DMV, event notification
# or trace event class of Service Broker carries it): reported only by an implementation declaring it.
TRACE = "decision_trace"
AREA: dict[str, tuple[str, ...]] = {
    Kind.BROKER_STARTED: (),
    Kind.DATABASE_BROKER_STARTED: (PERIODIC,),
    Kind.DATABASE_BROKER_START_FAILED: (PERIODIC,),
    Kind.MASTER_KEY_CREATED: (PERIODIC,),
    Kind.QUEUE_ALTERED: (ACTIVATION,),
    Kind.MONITOR_CREATED: (ACTIVATION,),
    Kind.MONITOR_REMOVED: (ACTIVATION,),
    Kind.ACTIVATION_NECESSARY: (ACTIVATION, TRACE),
    Kind.ACTIVATION_WITHHELD: (ACTIVATION, TRACE),
    Kind.ACTIVATION_TIME_OUT: (EXTERNAL,),
    Kind.PROCEDURE_STARTED: (ACTIVATION,),
    Kind.PROCEDURE_EXITED: (ACTIVATION,),
    Kind.EVENT_NOTIFICATION: (EXTERNAL,),
    Kind.ROWS_RETURNED: (),
    Kind.EMPTY_RESULT: (),
    Kind.READER_WAITING: (),
    Kind.TRANSACTION_COMMITTED: (),
    Kind.TRANSACTION_ROLLED_BACK: (),
    Kind.DIALOG_BEGUN: (),
    Kind.MESSAGE_SENT: (),
    Kind.MESSAGE_ARRIVED: (),
    Kind.ACKNOWLEDGED: (ROUTING,),
    Kind.MESSAGE_DROPPED: (ROUTING,),
    Kind.ROUTE_CREATED: (ROUTING,),
    Kind.ROUTE_ALTERED: (ROUTING,),
    Kind.ROUTE_DROPPED: (ROUTING,),
    Kind.ROUTES_MATCHED: (ROUTING, TRACE),
    Kind.ROUTE_CHOSEN: (ROUTING, TRACE),
    Kind.ROUTING_REQUESTED: ("dynamic_routing",),
    Kind.CONVERSATION_DELAYED: (ROUTING,),
    Kind.ROUTING_RETRIED: (ROUTING,),
    Kind.REPLY_RECOGNISED: (ROUTING,),
    Kind.MESSAGE_FORWARDING: ("forwarding",),
    Kind.MESSAGE_FORWARDED: ("forwarding",),
    Kind.FORWARDED_MESSAGE_DELETED: ("forwarding",),  # the forwarder's own clean-up (PER-5B)
    Kind.PRINCIPAL_PROBE: ("mirroring",),
    Kind.PRINCIPAL_LOST: ("mirroring",),
    Kind.MIRRORING_FAILOVER: ("mirroring",),
    Kind.INSTANCE_REACHABLE: (ROUTING,),
    Kind.INSTANCE_UNREACHABLE: (ROUTING,),
    Kind.MESSAGE_TRANSMITTED: (ROUTING,),
    Kind.MESSAGE_LOST_IN_TRANSIT: (ROUTING, PERIODIC),
    Kind.TRANSMISSION_PENDING: (ROUTING, PERIODIC),
    Kind.TRANSMITTER_RECLASSIFIED: (ROUTING, PERIODIC, TRACE),
    Kind.CONNECTION_ATTEMPT: (ROUTING, PERIODIC),
    Kind.CONNECTION_CLOSED: (ROUTING, PERIODIC),
    Kind.DISPATCHER_BUFFERED: (ROUTING,),  # where a message that came over the transport is
    Kind.DISPATCHER_SAVING: (ROUTING, PERIODIC),
    Kind.DISPATCHER_DELETED: (ROUTING,),  # a message undeliverable (stale or out of order) is dropped
    Kind.TIMER_NOTIFICATION: (PERIODIC, TRACE),
    Kind.TASK_HANDLERS_STARTED: (PERIODIC,),
    Kind.TASK_HANDLERS_FAILED: (PERIODIC,),
    Kind.TASK_HANDLERS_RESTARTED: (PERIODIC,),
    Kind.BROKER_CONFIGURATION_NOTIFICATION: (PERIODIC,),
    Kind.ACK_CLEANUP_STOPPED: (PERIODIC,),
    Kind.ACK_CLEANUP_RESUMED: (PERIODIC,),
}


def reported_by(kind: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Does an implementation with these capabilities report events of this kind?"""
    needed = AREA.get(kind)
    if needed is None:  # a kind the kit does not declare: nothing to compare it with
        return False
    return all(capability in capabilities for capability in needed)


# The fields each kind carries besides at_ms and kind (a field an event does not report is null).
STATEMENT_RESULT = ("conversation_group", "database", "has_where", "instance", "queue", "rows", "session", "statement")
FIELDS: dict[str, tuple[str, ...]] = {
    Kind.BROKER_STARTED: (),
    Kind.DATABASE_BROKER_STARTED: ("database", "instance"),
    Kind.DATABASE_BROKER_START_FAILED: ("database", "instance", "reason"),
    Kind.MASTER_KEY_CREATED: ("database", "instance"),
    Kind.QUEUE_ALTERED: ("database", "instance", "queue"),
    Kind.MONITOR_CREATED: ("database", "instance", "queue"),
    Kind.MONITOR_REMOVED: ("database", "instance", "queue"),
    Kind.ACTIVATION_NECESSARY: ("database", "instance", "queue", "rule", "trigger"),
    Kind.ACTIVATION_WITHHELD: ("database", "instance", "queue", "reason"),
    Kind.ACTIVATION_TIME_OUT: ("database", "instance", "queue"),
    Kind.PROCEDURE_STARTED: ("database", "instance", "procedure_name", "queue", "spid", "task"),
    Kind.PROCEDURE_EXITED: ("database", "instance", "queue", "reason", "spid", "task"),
    Kind.EVENT_NOTIFICATION: ("database", "event_type", "instance", "notification", "queue"),
    Kind.ROWS_RETURNED: STATEMENT_RESULT,
    Kind.EMPTY_RESULT: STATEMENT_RESULT,
    Kind.READER_WAITING: ("database", "has_where", "instance", "queue", "session", "statement"),
    Kind.TRANSACTION_COMMITTED: ("session",),
    Kind.TRANSACTION_ROLLED_BACK: ("returned", "session"),
    Kind.DIALOG_BEGUN: ("database", "dialog", "from_service", "instance", "to_broker_instance", "to_service"),
    Kind.MESSAGE_SENT: ("database", "dialog", "from_target", "instance", "message_sequence_number"),
    Kind.MESSAGE_ARRIVED: (
        "conversation_group",
        "database",
        "dialog",
        "from_target",
        "instance",
        "message_sequence_number",
        "queue",
        "service",
    ),
    Kind.ACKNOWLEDGED: ("broker_instance", "dialog", "instance"),
    Kind.MESSAGE_DROPPED: ("dialog", "from_target", "instance", "message_sequence_number", "reason", "rule"),
    Kind.ROUTE_CREATED: ("database", "instance", "route"),
    Kind.ROUTE_ALTERED: ("database", "instance", "route"),
    Kind.ROUTE_DROPPED: ("database", "instance", "route"),
    Kind.ROUTES_MATCHED: (
        "broker_instance",
        "dialog",
        "from_target",
        "instance",
        "message_sequence_number",
        "routes",
        "step",
        "table",
    ),
    Kind.ROUTE_CHOSEN: ("candidates", "dialog", "from_target", "instance", "message_sequence_number", "route", "step"),
    Kind.ROUTING_REQUESTED: (
        "dialog",
        "from_target",
        "instance",
        "message_sequence_number",
        "route",
        "service",
        "table",
    ),
    Kind.CONVERSATION_DELAYED: ("dialog", "from_target", "instance", "message_sequence_number", "step"),
    Kind.ROUTING_RETRIED: ("dialog", "from_target", "instance", "message_sequence_number"),
    Kind.REPLY_RECOGNISED: ("broker_instance", "dialog", "from_target", "instance", "message_sequence_number"),
    Kind.MESSAGE_FORWARDING: ("active", "instance"),
    Kind.MESSAGE_FORWARDED: ("address", "dialog", "from_target", "hops", "instance", "message_sequence_number"),
    Kind.FORWARDED_MESSAGE_DELETED: ("dialog", "from_target", "instance", "message_sequence_number"),
    Kind.PRINCIPAL_PROBE: (
        "address",
        "answer",
        "dialog",
        "from_target",
        "instance",
        "message_sequence_number",
        "route",
    ),
    Kind.PRINCIPAL_LOST: ("address", "answer", "dialog", "from_target", "instance", "message_sequence_number", "route"),
    Kind.MIRRORING_FAILOVER: ("database", "instance"),
    Kind.INSTANCE_REACHABLE: ("instance",),
    Kind.INSTANCE_UNREACHABLE: ("instance",),
    Kind.MESSAGE_TRANSMITTED: (
        "address",
        "dialog",
        "from_target",
        "instance",
        "message_sequence_number",
        "to_instance",
    ),
    Kind.MESSAGE_LOST_IN_TRANSIT: ("address", "dialog", "from_target", "instance", "message_sequence_number"),
    Kind.TRANSMISSION_PENDING: ("dialog", "from_target", "instance", "message_sequence_number", "status"),
    Kind.TRANSMITTER_RECLASSIFIED: ("dialogs", "instance"),
    Kind.CONNECTION_ATTEMPT: ("address", "instance", "result"),
    Kind.CONNECTION_CLOSED: ("address", "instance", "reason"),
    Kind.DISPATCHER_BUFFERED: ("database", "dialog", "from_target", "instance", "message_sequence_number"),
    Kind.DISPATCHER_SAVING: ("delay_s", "instance", "mode"),
    Kind.DISPATCHER_DELETED: ("database", "dialog", "from_target", "instance", "message_sequence_number", "reason"),
    Kind.TIMER_NOTIFICATION: ("instance", "number", "tasks"),
    Kind.TASK_HANDLERS_STARTED: ("count", "instance"),
    Kind.TASK_HANDLERS_FAILED: ("count", "instance"),
    Kind.TASK_HANDLERS_RESTARTED: ("count", "instance"),
    Kind.BROKER_CONFIGURATION_NOTIFICATION: ("instance",),
    Kind.ACK_CLEANUP_STOPPED: ("database", "instance"),
    Kind.ACK_CLEANUP_RESUMED: ("database", "instance"),
}


# The reasons of the kinds whose reason is one of a few (message_dropped says it in free text).
REASONS: dict[str, tuple[str, ...]] = {
    Kind.DATABASE_BROKER_START_FAILED: ("missing master key",),
    Kind.ACTIVATION_WITHHELD: ("MAX_QUEUE_READERS", "notification time-out"),
    Kind.PROCEDURE_EXITED: ("empty RECEIVE", "exited"),
    Kind.CONNECTION_CLOSED: ("idle", "disconnected"),
    Kind.DISPATCHER_DELETED: ("out of order", "stale"),
}


# Every field an event may carry, and what it says; at_ms (epoch milliseconds) and kind are on every event.
FIELD_MEANINGS: dict[str, str] = {
    "active": "whether message forwarding is now on",
    "address": "a network address, TCP://host:port, as the route or connection names it",
    "answer": "what a mirroring partner said when asked",
    "broker_instance": "a broker instance GUID",
    "candidates": "the routes the choice was made among (list)",
    "conversation_group": "the conversation group of the message or the rows",
    "count": "how many task handlers",
    "database": "a database of the instance",
    "delay_s": "seconds the dispatcher waits before saving a message",
    "dialog": "the dialog, as the scenario named it",
    "dialogs": "the dialogs the transmitter registered again (list)",
    "event_type": "the event notification's event type: QUEUE_ACTIVATION",
    "from_service": "the initiating service",
    "from_target": "whether the message goes from the target back to the initiator (a reply)",
    "has_where": "whether the RECEIVE has a WHERE clause",
    "hops": "how many times the message has been forwarded",
    "instance": "the instance the event happened on",
    "message_sequence_number": "the message's number in its dialog and direction, from 0",
    "mode": "how the dispatcher saves messages: running or stopped",
    "notification": "the event notification's name",
    "number": "the timer notification's number, from 1 at broker start",
    "procedure_name": "the activation stored procedure started",
    "queue": "a queue of the database",
    "reason": "why: one of a few for most kinds, free text for message_dropped",
    "result": "how a connection attempt ended",
    "returned": "how many messages a rollback put back on their queues",
    "route": "a route's name",
    "routes": "the routes that matched (list)",
    "rows": "the rows the statement returned (list of objects with dialog, message_sequence_number, ...)",
    "rule": "the catalogue rule that decided (ACT-06, RTC-5, ...)",
    "service": "a service's name",
    "session": "the session, as the scenario named it; an activated task's session is QUEUE#N",
    "spid": "the session id, from 51",
    "statement": "the statement that was run",
    "status": "why a message waits in the transmission queue",
    "step": "the routing step that decided (RTM-1..8, RTC-1..4)",
    "table": "the route table used: msdb.sys.routes or DATABASE.sys.routes",
    "task": "the activated task's number for its queue, from 1",
    "tasks": "the periodic tasks the timer notification ran, in order (list)",
    "to_broker_instance": "the broker instance the dialog was begun to, or null",
    "to_instance": "the instance the message was transmitted to",
    "to_service": "the target service",
    "trigger": "what made the queue monitor look",
}


# The kinds that are the engine's reasoning: which activation it found necessary or withheld, which routes
# matched and which it chose, the ticks of its timer, the transmitter's re-registrations.
DECISION_TRACE = frozenset(kind for kind, needed in AREA.items() if TRACE in needed)
# Fields that are reasoning although their kind is observable: the rule or routing step that decided.
DECISION_FIELDS = frozenset({"rule", "step"})
# Echoes of the kit's own faults: the kit knows when it made handlers fail, stopped a clean-up, created a
# master key or cut the network, so no scenario asks an implementation to repeat it; reporting them is optional.
ECHOES = frozenset(
    {
        Kind.TASK_HANDLERS_FAILED,
        Kind.ACK_CLEANUP_STOPPED,
        Kind.MASTER_KEY_CREATED,
        Kind.INSTANCE_REACHABLE,
        Kind.INSTANCE_UNREACHABLE,
        Kind.DISPATCHER_SAVING,
        Kind.MESSAGE_FORWARDING,
        Kind.MIRRORING_FAILOVER,
        Kind.MESSAGE_LOST_IN_TRANSIT,
    }
)

# Reports the documents leave to the implementation, beside the echoes: where the reference reports one, an
# implementation may stay silent, though what it does report must still agree. PER-5D fires the Broker
# Configuration Notification "for BCN clients", and the kit's topologies name none.
MAY_OMIT = frozenset({Kind.BROKER_CONFIGURATION_NOTIFICATION})
# Reported the first time, and after that as the implementation likes: PER-5C asks the broker to try again to
# start a database, not to report each attempt that failed. The fields say what "again" is about.
FIRST_REQUIRED: dict[str, tuple[str, ...]] = {Kind.DATABASE_BROKER_START_FAILED: ("instance", "database")}
# A database whose broker starts with the instance may be reported as started then, or not: the kind exists for
# PER-5C's retries, and saying that a broker started where it did is no difference.
MAY_REPORT_AT_START = frozenset({Kind.DATABASE_BROKER_STARTED})
# Reported at either of two moments, neither of which the documents name: a forward that must wait for its
# connection may be reported when the forwarder decides on it, or once it sends the message on (never both).
EITHER_MOMENT: dict[str, str] = {
    Kind.MESSAGE_FORWARDED: "when sent on, or already when decided for a message that waits for its connection"
}


# The rule an event speaks for when its own fields (rule, step) name none: what the workload stage blames.
EVIDENCES: dict[str, str] = {
    Kind.PROCEDURE_STARTED: "ACT-05",
    Kind.PROCEDURE_EXITED: "ACT-05",
    Kind.ACTIVATION_NECESSARY: "ACT-05",
    Kind.ACTIVATION_WITHHELD: "ACT-10",
    Kind.EVENT_NOTIFICATION: "ACT-12",
    Kind.ACTIVATION_TIME_OUT: "ACT-12",
    Kind.MONITOR_CREATED: "ACT-02",
    Kind.MONITOR_REMOVED: "ACT-02",
    Kind.EMPTY_RESULT: "ACT-07",
    Kind.ROWS_RETURNED: "ACT-09",
    Kind.MESSAGE_ARRIVED: "RTL-1",
    Kind.ROUTES_MATCHED: "RTM-0",
    Kind.ROUTE_CHOSEN: "RTC-0",
    Kind.CONVERSATION_DELAYED: "RTM-8",
    Kind.ROUTING_RETRIED: "RTM-8",
    Kind.ROUTING_REQUESTED: "RTM-4",
    Kind.REPLY_RECOGNISED: "RTE-05",
    Kind.ACKNOWLEDGED: "RTE-04",
    Kind.PRINCIPAL_PROBE: "RTR-3",
    Kind.PRINCIPAL_LOST: "RTR-4",
    Kind.MIRRORING_FAILOVER: "RTR-4",
    Kind.MESSAGE_FORWARDED: "RTX-1",
    Kind.TIMER_NOTIFICATION: "PER-0",
    Kind.TASK_HANDLERS_STARTED: "PER-1B",
    Kind.TASK_HANDLERS_RESTARTED: "PER-1B",
    Kind.DISPATCHER_BUFFERED: "PER-1C",
    Kind.DISPATCHER_DELETED: "PER-1C",
    Kind.CONNECTION_ATTEMPT: "PER-2A",
    Kind.MESSAGE_TRANSMITTED: "PER-2A",
    Kind.TRANSMISSION_PENDING: "PER-2B",
    Kind.TRANSMITTER_RECLASSIFIED: "PER-2B",
    Kind.CONNECTION_CLOSED: "PER-5A",
    Kind.FORWARDED_MESSAGE_DELETED: "PER-5B",
    Kind.DATABASE_BROKER_STARTED: "PER-5C",
    Kind.DATABASE_BROKER_START_FAILED: "PER-5C",
    Kind.BROKER_CONFIGURATION_NOTIFICATION: "PER-5D",
    Kind.ACK_CLEANUP_RESUMED: "PER-5E",
}
