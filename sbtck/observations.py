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
