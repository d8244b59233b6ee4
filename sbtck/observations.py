"""Every kind of event an implementation reports, declared once.

The engine emits them, the steps, invariants, differential check and report
read them by these names; a feature's log table writes a kind with spaces
(``message arrived``). The value of each member is the kind on the wire.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    # the broker and its databases
    BROKER_STARTED = "broker_started"
    DATABASE_BROKER_STARTED = "database_broker_started"
    DATABASE_BROKER_START_FAILED = "database_broker_start_failed"
    MASTER_KEY_CREATED = "master_key_created"
    # queues, monitors and activation
    QUEUE_ALTERED = "queue_altered"
    MONITOR_CREATED = "monitor_created"
    MONITOR_REMOVED = "monitor_removed"
    ACTIVATION_NECESSARY = "activation_necessary"
    ACTIVATION_WITHHELD = "activation_withheld"
    ACTIVATION_TIME_OUT = "activation_time_out"
    PROCEDURE_STARTED = "procedure_started"
    PROCEDURE_EXITED = "procedure_exited"
    EVENT_NOTIFICATION = "event_notification"
    # sessions
    ROWS_RETURNED = "rows_returned"
    EMPTY_RESULT = "empty_result"
    READER_WAITING = "reader_waiting"
    TRANSACTION_COMMITTED = "transaction_committed"
    TRANSACTION_ROLLED_BACK = "transaction_rolled_back"
    # dialogs and messages
    DIALOG_BEGUN = "dialog_begun"
    MESSAGE_SENT = "message_sent"
    MESSAGE_ARRIVED = "message_arrived"
    ACKNOWLEDGED = "acknowledged"
    MESSAGE_DROPPED = "message_dropped"
    # routing
    ROUTE_CREATED = "route_created"
    ROUTE_ALTERED = "route_altered"
    ROUTE_DROPPED = "route_dropped"
    ROUTES_MATCHED = "routes_matched"
    ROUTE_CHOSEN = "route_chosen"
    ROUTING_REQUESTED = "routing_requested"
    CONVERSATION_DELAYED = "conversation_delayed"
    ROUTING_RETRIED = "routing_retried"
    REPLY_RECOGNISED = "reply_recognised"
    MESSAGE_FORWARDING = "message_forwarding"  # forwarding switched on or off
    MESSAGE_FORWARDED = "message_forwarded"
    FORWARDED_MESSAGE_DELETED = "forwarded_message_deleted"
    PRINCIPAL_PROBE = "principal_probe"
    PRINCIPAL_LOST = "principal_lost"
    MIRRORING_FAILOVER = "mirroring_failover"
    INSTANCE_REACHABLE = "instance_reachable"
    INSTANCE_UNREACHABLE = "instance_unreachable"
    # the transport, the transmitter and the dispatcher
    MESSAGE_TRANSMITTED = "message_transmitted"
    MESSAGE_LOST_IN_TRANSIT = "message_lost_in_transit"
    TRANSMISSION_PENDING = "transmission_pending"
    TRANSMITTER_RECLASSIFIED = "transmitter_reclassified"
    CONNECTION_ATTEMPT = "connection_attempt"
    CONNECTION_CLOSED = "connection_closed"
    DISPATCHER_BUFFERED = "dispatcher_buffered"
    DISPATCHER_SAVING = "dispatcher_saving"
    DISPATCHER_DELETED = "dispatcher_deleted"
    # the periodic tasks
    TIMER_NOTIFICATION = "timer_notification"
    TASK_HANDLERS_STARTED = "task_handlers_started"
    TASK_HANDLERS_FAILED = "task_handlers_failed"
    TASK_HANDLERS_RESTARTED = "task_handlers_restarted"
    BROKER_CONFIGURATION_NOTIFICATION = "broker_configuration_notification"
    ACK_CLEANUP_STOPPED = "ack_cleanup_stopped"
    ACK_CLEANUP_RESUMED = "ack_cleanup_resumed"


# The capabilities an implementation declares when it reports a kind (all of them; none: every implementation).
# The workload stage compares an implementation's events only of the kinds its capabilities cover.
ACTIVATION, EXTERNAL, ROUTING, PERIODIC = "activation", "external_activation", "routing", "periodic_tasks"
AREA: dict[Kind, tuple[str, ...]] = {
    Kind.BROKER_STARTED: (),
    Kind.DATABASE_BROKER_STARTED: (PERIODIC,),
    Kind.DATABASE_BROKER_START_FAILED: (PERIODIC,),
    Kind.MASTER_KEY_CREATED: (PERIODIC,),
    Kind.QUEUE_ALTERED: (ACTIVATION,),
    Kind.MONITOR_CREATED: (ACTIVATION,),
    Kind.MONITOR_REMOVED: (ACTIVATION,),
    Kind.ACTIVATION_NECESSARY: (ACTIVATION,),
    Kind.ACTIVATION_WITHHELD: (ACTIVATION,),
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
    Kind.ROUTES_MATCHED: (ROUTING,),
    Kind.ROUTE_CHOSEN: (ROUTING,),
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
    Kind.TRANSMITTER_RECLASSIFIED: (ROUTING, PERIODIC),
    Kind.CONNECTION_ATTEMPT: (ROUTING, PERIODIC),
    Kind.CONNECTION_CLOSED: (ROUTING, PERIODIC),
    Kind.DISPATCHER_BUFFERED: (ROUTING,),  # where a message that came over the transport is
    Kind.DISPATCHER_SAVING: (ROUTING, PERIODIC),
    Kind.DISPATCHER_DELETED: (ROUTING,),  # a message undeliverable (stale or out of order) is dropped
    Kind.TIMER_NOTIFICATION: (PERIODIC,),
    Kind.TASK_HANDLERS_STARTED: (PERIODIC,),
    Kind.TASK_HANDLERS_FAILED: (PERIODIC,),
    Kind.TASK_HANDLERS_RESTARTED: (PERIODIC,),
    Kind.BROKER_CONFIGURATION_NOTIFICATION: (PERIODIC,),
    Kind.ACK_CLEANUP_STOPPED: (PERIODIC,),
    Kind.ACK_CLEANUP_RESUMED: (PERIODIC,),
}


def reported_by(kind: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Does an implementation with these capabilities report events of this kind?"""
    try:
        needed = AREA[Kind(kind)]
    except ValueError:  # a kind the kit does not declare: nothing to compare it with
        return False
    return all(capability in capabilities for capability in needed)
