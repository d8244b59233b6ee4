"""The views ``query_view`` answers, each with its columns, declared once (as the event kinds are in observations.py).

Columns named like an event field mean what the field means
(``observations.FIELD_MEANINGS``); the others are said here.
"""

from __future__ import annotations

from sbtck.observations import EXACT, FREE_TEXT, RELATIVE, TIME

# The columns of every view query_view answers, and what the kit's own columns say; times are epoch milliseconds.
MESSAGE_ROW = ("instance", "dialog", "message_sequence_number", "from_target", "to_service_name")
VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "sys.dm_broker_queue_monitors": (
        "database_id",
        "queue_id",
        "instance",
        "database",
        "queue",
        "state",
        "last_empty_rowset_time",
        "last_activated_time",
        "tasks_waiting",
    ),
    "sys.dm_broker_activated_tasks": (
        "spid",
        "database_id",
        "queue_id",
        "instance",
        "database",
        "queue",
        "task",
        "procedure_name",
    ),
    # of QueryView.database on QueryView.instance; no database means msdb
    "sys.routes": (
        "instance",
        "database",
        "name",
        "remote_service_name",
        "broker_instance",
        "address",
        "mirror_address",
        "expires_ms",
    ),
    "sys.transmission_queue": (*MESSAGE_ROW, "transmission_status", "received_ms"),
    "sys.conversation_endpoints": (
        "dialog",
        "instance",
        "database",
        "far_service",
        "far_broker_instance",
        "acknowledged",
    ),
    "sys.dm_broker_connections": ("instance", "address", "state", "opened_ms", "last_activity_ms"),
    # the kit's own windows on state SQL Server shows no view of
    "sbtck.dispatcher_buffers": (
        "instance",
        "database",
        "dialog",
        "message_sequence_number",
        "from_target",
        "arrived_ms",
    ),
    "sbtck.forwarder": (*MESSAGE_ROW, "transmission_status", "received_ms"),
    "sbtck.periodic_state": (
        "instance",
        "task_handlers",
        "running_task_handlers",
        "database",
        "broker_started",
        "ack_cleanup_running",
    ),
}
# What one row of each view is: which rows a view holds, as its columns say what each holds (cr13's G9).
VIEW_ROWS: dict[str, str] = {
    "sys.dm_broker_queue_monitors": "a queue that has a queue monitor (activation STATUS = ON, or a QUEUE_ACTIVATION"
    " event notification: ACT-02)",
    "sys.dm_broker_activated_tasks": "a stored procedure activation started that is still running (ACT-11)",
    "sys.routes": "a route of the table asked for: the database's, or msdb's where `database` is null",
    "sys.transmission_queue": "a message waiting in the instance's transmission queue",
    "sys.conversation_endpoints": "a dialog, its initiator's endpoint (where BEGIN DIALOG ran); none for the target's",
    "sys.dm_broker_connections": "a connection the instance has open, by the address it was opened to",
    "sbtck.dispatcher_buffers": "a message the instance's message dispatcher holds in memory (PER-1C)",
    "sbtck.forwarder": "a message the instance's forwarder holds in memory (PER-5B)",
    "sbtck.periodic_state": "a database of an instance: an instance without databases has no row",
}
# The JSON type of every column, by name as its meaning is: a value of another type is the implementation's
# error, named by the answer checks (sbtck/iut/answers.py) before a step reads it.
COLUMN_TYPES: dict[str, str] = {
    "ack_cleanup_running": "boolean",
    "acknowledged": "boolean",
    "address": "string",
    "arrived_ms": "integer",
    "broker_instance": "string or null",
    "broker_started": "boolean",
    "database": "string",
    "database_id": "integer",
    "dialog": "string",
    "expires_ms": "integer or null",
    "far_broker_instance": "string or null",
    "far_service": "string",
    "from_target": "boolean",
    "instance": "string",
    "last_activated_time": "integer or null",
    "last_activity_ms": "integer",
    "last_empty_rowset_time": "integer or null",
    "message_sequence_number": "integer",
    "mirror_address": "string or null",
    "name": "string",
    "opened_ms": "integer",
    "procedure_name": "string",
    "queue": "string",
    "queue_id": "integer",
    "received_ms": "integer",
    "remote_service_name": "string or null",
    "running_task_handlers": "integer",
    "spid": "integer",
    "state": "string",
    "task": "integer",
    "task_handlers": "integer",
    "tasks_waiting": "integer",
    "to_service_name": "string",
    "transmission_status": "string",
}
# Where a view's column has a type of its own: msdb's routes are the instance's, in no user database, and an
# implementation may name msdb or give null (the steps never read it).
VIEW_COLUMN_TYPES: dict[str, dict[str, str]] = {"sys.routes": {"database": "string or null"}}


def column_type(view: str | None, column: str) -> str:
    """The JSON type the contract declares for COLUMN (of VIEW, or of a row RECEIVE returns when None)."""
    return VIEW_COLUMN_TYPES.get(view or "", {}).get(column) or COLUMN_TYPES[column]


COLUMN_MEANINGS: dict[str, str] = {
    "acknowledged": "whether the initiator has had the target's acknowledgement (RTE-04)",
    "ack_cleanup_running": "whether the clean-up of acknowledged messages runs in the database (PER-5E)",
    "arrived_ms": "when the message reached the dispatcher",
    "broker_started": "whether the database's broker has started (PER-5C)",
    "database_id": "the database's id, from 5",
    "expires_ms": "when the route's lifetime ends, or null",
    "far_broker_instance": "the broker instance the conversation is bound to: the one BEGIN DIALOG named, then the"
    " one the target's acknowledgement carried (RTE-04); null before either",
    "far_service": "the service at the other end",
    "last_activated_time": "when the monitor last started a procedure or raised a notification, or null",
    "last_activity_ms": "when the connection last carried a message",
    "last_empty_rowset_time": "when a RECEIVE without WHERE or GET CONVERSATION GROUP last returned nothing, or null",
    "mirror_address": "the route's MIRROR_ADDRESS, or null",
    "name": "the route's name",
    "opened_ms": "when the connection opened",
    "queue_id": "the queue's object id",
    "received_ms": "when the message began to wait in the instance's transmission queue or forwarder (its SEND or"
    " arrival, if it waited from then); routing it again that leaves it waiting there keeps it",
    "remote_service_name": "the service the route is for, or null for any",
    "running_task_handlers": "task handlers running now (PER-1B)",
    "state": "the monitor's state: NOTIFIED while the time-out of a QUEUE_ACTIVATION notification it raised runs"
    " (ACT-13), else RECEIVES_OCCURRING while procedures it started run or sessions wait in RECEIVE on the queue, else"
    " INACTIVE; or the connection's (CONNECTED)",
    "task_handlers": "task handlers the instance starts and keeps running, up to 2 x CPUs (PER-1B)",
    "tasks_waiting": "sessions waiting in RECEIVE without WHERE or GET CONVERSATION GROUP on the queue",
    "to_service_name": "the service the message goes to",
    "transmission_status": "why the message waits",
}


# transmission_status (a free text, COLUMN_CLASSES) as the reference engine writes it; a message waiting for a
# connection, or whose connection failed, says to which address ("waiting for a connection to TCP://...")
STATUS_DELAYED = "delayed"
STATUS_CONNECTING = "waiting for a connection"
STATUS_NO_PRINCIPAL = "no partner claims to be principal"
STATUS_BEHIND = "behind an earlier message of the conversation"
STATUS_FAILED = "failed"


# How each column compares (the classes of sbtck/observations.py): exact unless declared here; times by their
# name. A column's class is the same in every view.
COLUMN_CLASSES: dict[str, tuple[str, str]] = {
    "spid": (RELATIVE, 'the documents say only "from 51": compared by the activated task it belongs to'),
    "database_id": (RELATIVE, "an object id the implementation picks: compared by the database it names"),
    "queue_id": (RELATIVE, "an object id the implementation picks: compared by the queue it names"),
    "transmission_status": (
        FREE_TEXT,
        "no document defines these words, and a real SQL Server's transmission_status is an error description",
    ),
}
# the complete value set of an exact column whose values are not the scenario's names
COLUMN_VALUES: dict[str, tuple[str, ...]] = {"state": ("INACTIVE", "NOTIFIED", "RECEIVES_OCCURRING", "CONNECTED")}
# what a relative column refers to: the row's columns that name it
REFERS_TO: dict[str, tuple[str, ...]] = {
    "spid": ("instance", "database", "queue", "task"),
    "database_id": ("instance", "database"),
    "queue_id": ("instance", "database", "queue"),
}


def column_class(column: str) -> str:
    """How COLUMN compares: its declared class, a time by its name, else exact."""
    declared = COLUMN_CLASSES.get(column)
    if declared is not None:
        return declared[0]
    return TIME if column.endswith(("_ms", "_time")) else EXACT
