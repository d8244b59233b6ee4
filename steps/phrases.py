"""Every step phrase of the kit, written once.

From each declaration come the step's matcher (steps/*_steps.py bind their
functions with ``@step_for(NAME)``), the reproducers' text (sbtck/workloads/reproduce.py
says a contract command with ``NAME.text(...)``) and docs/steps.md
(``python -m sbtck.steps.phrases_doc`` writes it). The notation is in
sbtck/steps/template.py. A test checks that every phrase is used by a feature and
every step of the features is exactly one phrase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sbtck.steps.template import Template

ACTION, GIVEN, THEN = "action", "given", "then"
SECTIONS = {
    "setup": "Setting the scene",
    "activation": "Queues and activation",
    "session": "Sessions",
    "routing": "Routing",
    "periodic": "Faults for the periodic tasks",
    "views": "What the views show",
    "log": "What the log shows",
    "workload": "Reproducers of the workload stage",
}


@dataclass
class Phrase:
    """A step: how it reads, where it may stand (``ACTION`` is both Given and When), an example and what it does."""

    section: str
    kind: str
    source: str
    example: str
    doc: str
    argument: str = ""  # "a table" or "a doc string" the step takes below it
    template: Template = field(init=False)

    def __post_init__(self) -> None:
        self.template = Template(self.source)

    def text(self, **values: object) -> str:
        return self.template.text(**values)


TABLE = '<database "{database}"|msdb> of "{instance}"'
DB_OF = 'database "{database}" <on|of> "{instance}"'
WHOSE = '[ for queue "{queue}"][ for dialog "{dialog}"][ at "{instance}"]'
SPAN = "[ from second {since:time}][ until second {until:time}]"
WAIT = "[ waiting up to {wait:number} second[s]]"

# ------------------------------------------------------------------ setting the scene
NAMED_TOPOLOGY = Phrase(
    "setup", GIVEN, 'the topology "{name}"', 'the topology "activation"', "Starts from a topology file of the kit."
)
INLINE_TOPOLOGY = Phrase(
    "setup", GIVEN, "the topology:", "the topology:", "Starts from the topology written below.", "a doc string"
)
BEGIN_DIALOG = Phrase(
    "setup",
    ACTION,
    'dialog "{dialog}" is begun from service "{initiator}" to service "{target}"'
    "[ on the broker instance of {broker:token}]",
    'dialog "D1" is begun from service "Initiator" to service "Target" on the broker instance of sql2.orders',
    "BEGIN DIALOG; the broker instance is a GUID or INSTANCE.DATABASE.",
)
SEND = Phrase(
    "setup",
    ACTION,
    '<a message is|{count:int} messages are> sent on dialog "{dialog}"',
    '3 messages are sent on dialog "D1"',
    "SEND by the initiator.",
)
REPLY = Phrase(
    "setup",
    ACTION,
    '<a reply is|{count:int} replies are> sent on dialog "{dialog}"',
    'a reply is sent on dialog "D1"',
    "SEND by the target.",
)
TIME_PASSES = Phrase(
    "setup",
    ACTION,
    "time passes to second {second:rest}",
    "time passes to second {activation_empty_window_s} + 1",
    "Moves the frozen clock to a second counted from the start; it never goes back.",
)

# ------------------------------------------------------------------ queues and activation
ALTER_QUEUE = Phrase(
    "activation",
    ACTION,
    'ALTER QUEUE "{queue}" WITH ACTIVATION ({options:paren})',
    'ALTER QUEUE "WorkQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 2)',
    "STATUS = ON|OFF, PROCEDURE_NAME = name, MAX_QUEUE_READERS = n, in any order.",
)
CREATE_NOTIFICATION = Phrase(
    "activation",
    ACTION,
    'CREATE EVENT NOTIFICATION "{name}" ON QUEUE "{queue}" FOR QUEUE_ACTIVATION',
    'CREATE EVENT NOTIFICATION "Wake" ON QUEUE "WorkQueue" FOR QUEUE_ACTIVATION',
    "External activation of the queue.",
)
DROP_NOTIFICATION = Phrase(
    "activation",
    ACTION,
    'DROP EVENT NOTIFICATION "{name}" ON QUEUE "{queue}"',
    'DROP EVENT NOTIFICATION "Wake" ON QUEUE "WorkQueue"',
    "Ends external activation of the queue.",
)
PROCEDURE_EXITS = Phrase(
    "activation",
    ACTION,
    'activated task {task:int} of queue "{queue}" exits',
    'activated task 1 of queue "WorkQueue" exits',
    "The n-th procedure activation started for the queue returns.",
)

# ------------------------------------------------------------------ sessions
BEGIN_TRANSACTION = Phrase(
    "session", ACTION, 'session "{session}" begins a transaction', 'session "S1" begins a transaction', "BEGIN TRAN."
)
COMMIT = Phrase("session", ACTION, 'session "{session}" commits', 'session "S1" commits', "COMMIT.")
ROLLBACK = Phrase("session", ACTION, 'session "{session}" rolls back', 'session "S1" rolls back', "ROLLBACK.")
RECEIVE = Phrase(
    "session",
    ACTION,
    'session "{session}" receives [top {top:int} ]from queue "{queue}"'
    '[ where <the dialog is "{dialog}"|the conversation group is that of dialog "{group}">]' + WAIT,
    'session "S2" receives top 1 from queue "WorkQueue" where the dialog is "D1" waiting up to 5 seconds',
    "RECEIVE, with TOP, a WHERE clause and WAITFOR as written.",
)
GET_CONVERSATION_GROUP = Phrase(
    "session",
    ACTION,
    'session "{session}" gets a conversation group from queue "{queue}"' + WAIT,
    'session "S1" gets a conversation group from queue "WorkQueue" waiting up to 2 seconds',
    "GET CONVERSATION GROUP, with WAITFOR as written.",
)

# ------------------------------------------------------------------ routing
ROUTES_ARE = Phrase(
    "routing",
    GIVEN,
    f"the routes in {TABLE} are:",
    'the routes in msdb of "sql2" are:',
    "Replaces the whole route table, AutoCreatedLocal included, with the rows below (a 'name' column first).",
    "a table",
)
ROUTE_DDL = Phrase(
    "routing",
    ACTION,
    f"in {TABLE}: {{verb:CREATE|ALTER}} ROUTE {{name:word}} WITH {{options:rest}}",
    "in database \"shop\" of \"sql1\": CREATE ROUTE ToOrders WITH SERVICE_NAME = 'Target', ADDRESS = 'LOCAL'",
    "CREATE or ALTER ROUTE with SERVICE_NAME, BROKER_INSTANCE, ADDRESS, MIRROR_ADDRESS, LIFETIME.",
)
DROP_ROUTE = Phrase(
    "routing",
    ACTION,
    f"in {TABLE}: DROP ROUTE {{name:word}}",
    'in msdb of "sql2": DROP ROUTE AutoCreatedLocal',
    "DROP ROUTE.",
)
ANSWER_ROUTING_REQUEST = Phrase(
    "routing",
    ACTION,
    f'the dynamic routing service answers for service "{{service}}" in {TABLE} with ADDRESS = {{address:token}}',
    'the dynamic routing service answers for service "Target" in database "shop" of "sql1" '
    "with ADDRESS = TCP://sql2.example:4022",
    "The dynamic routing service creates the route a routing request asked for.",
)
FORWARDING = Phrase(
    "routing",
    ACTION,
    'message forwarding is {state:enabled|disabled} on "{instance}"',
    'message forwarding is enabled on "sql5"',
    "Message forwarding of the instance's endpoint.",
)
REACHABLE = Phrase(
    "routing",
    ACTION,
    'instance "{instance}" {state:cannot be reached|can be reached again}',
    'instance "sql3" cannot be reached',
    "The network to the instance fails or comes back.",
)
FAILOVER = Phrase(
    "routing",
    ACTION,
    'the copy of database "{database}" on "{instance}" becomes the principal',
    'the copy of database "orders" on "sql3" becomes the principal',
    "Database mirroring fails over.",
)

# ------------------------------------------------------------------ faults for the periodic tasks
HANDLERS_FAIL = Phrase(
    "periodic",
    ACTION,
    '<{count:1} task handler of "{instance}" fails|{count:int} task handlers of "{instance}" fail>',
    '2 task handlers of "sql1" fail',
    "Task handlers fail to start.",
)
DISPATCHER_SAVING = Phrase(
    "periodic",
    ACTION,
    'the dispatcher of "{instance}" '
    "<{how:stops saving messages|saves messages again}|saves each message {delay:number} seconds after it arrives>",
    'the dispatcher of "sql2" saves each message 12 seconds after it arrives',
    "How the message dispatcher saves the messages it receives.",
)
LOSE = Phrase(
    "periodic",
    ACTION,
    'the network loses [{every:every transmission of} ]message {sequence:int} of dialog "{dialog}"',
    'the network loses every transmission of message 0 of dialog "D1"',
    "Its next transmission never arrives; it stays unacknowledged. With *every transmission of*, neither does"
    " a copy a broker may send again.",
)
CONNECTION_DROPS = Phrase(
    "periodic",
    ACTION,
    'the connection from "{instance}" to "{address}" drops',
    'the connection from "sql1" to "TCP://sql2.example:4022" drops',
    "The transport connection ends.",
)
TRANSMISSION_FAILS = Phrase(
    "periodic",
    ACTION,
    'the transmission of dialog "{dialog}" fails {why:for lack of memory|security validation}',
    'the transmission of dialog "D1" fails for lack of memory',
    "The transmitter cannot send the dialog's messages.",
)
MASTER_KEY = Phrase(
    "periodic",
    ACTION,
    f"CREATE MASTER KEY in {DB_OF}",
    'CREATE MASTER KEY in database "orders" of "sql2"',
    "The database gets the master key its broker needs.",
)
CLEANUP_STOPS = Phrase(
    "periodic",
    ACTION,
    f"the acknowledged-message clean-up of {DB_OF} stops",
    'the acknowledged-message clean-up of database "shop" on "sql1" stops',
    "The clean-up of acknowledged messages stops in the database.",
)

# ------------------------------------------------------------------ what the views show
HAS_MONITOR = Phrase(
    "views",
    THEN,
    'queue "{queue}" has {no:a|no} queue monitor',
    'queue "WorkQueue" has a queue monitor',
    "A row, or none, in sys.dm_broker_queue_monitors.",
)
MONITOR_ROW = Phrase(
    "views",
    THEN,
    'sys.dm_broker_queue_monitors shows for queue "{queue}":',
    'sys.dm_broker_queue_monitors shows for queue "WorkQueue":',
    "The queue's row has the values below (column | value).",
    "a table",
)
TASK_COUNT = Phrase(
    "views",
    THEN,
    '{count:count} activated task[s] <run[s]|are running|is running> for queue "{queue}"',
    '2 activated tasks run for queue "WorkQueue"',
    "Rows of sys.dm_broker_activated_tasks for the queue.",
)
TASK_ROWS = Phrase(
    "views",
    THEN,
    'sys.dm_broker_activated_tasks shows for queue "{queue}":',
    'sys.dm_broker_activated_tasks shows for queue "WorkQueue":',
    "The queue's rows are exactly those below, in order.",
    "a table",
)
HAS_CONNECTION = Phrase(
    "views",
    THEN,
    '"{instance}" has {no:a|no} connection to "{address}"',
    '"sql1" has a connection to "TCP://sql2.example:4022"',
    "A row, or none, in sys.dm_broker_connections.",
)
HOLDS = Phrase(
    "views",
    THEN,
    '{what:the dispatcher of|the forwarder of|the transmission queue of} "{instance}" holds {count:count} message[s]',
    'the transmission queue of "sql1" holds no message',
    "Messages buffered by the dispatcher, held by the forwarder, or in sys.transmission_queue.",
)
HELD_SINCE = Phrase(
    "views",
    THEN,
    '{what:the forwarder of|the transmission queue of} "{instance}" has held message {message}'
    " since second {second:rest}",
    'the transmission queue of "sql1" has held message D1:0 since second 2',
    "The message (DIALOG:SEQUENCE, sent by the initiator) has one row there, and its received_ms is that second:"
    " when it entered the transmission queue, or reached the forwarder.",
)
HOLDS_MESSAGE = Phrase(
    "views",
    THEN,
    '{what:the forwarder of|the transmission queue of} "{instance}" <holds|{none:holds no copy of}> message'
    " {message} received by second {second:rest}",
    'the forwarder of "sql5" holds message D1:0 received by second 10',
    "A row of the message (DIALOG:SEQUENCE, sent by the initiator) there has a received_ms at or before that"
    " second; with *no copy of*, none has. A broker that sends a message again may hold copies, each received"
    " when it came.",
)
RUNNING_HANDLERS = Phrase(
    "views",
    THEN,
    '"{instance}" has all[ but {down:int}] of its task handlers running',
    '"sql1" has all but 1 of its task handlers running',
    "Task handlers running on the instance, against the number it keeps running (up to 2 x its CPUs, PER-1B).",
)

# ------------------------------------------------------------------ what the log shows
LOG_SHOWS = Phrase(
    "log",
    THEN,
    f"the log{WHOSE} shows {{how:exactly|first|each once}}{SPAN}:",
    'the log for queue "WorkQueue" shows exactly from second 5:',
    "The events of the kinds the table names are exactly its rows, in order (see Log tables). *first*: the first"
    " of them are its rows, and more may follow, where a broker may send a message again while it has not"
    " arrived. *each once*: a row repeated (its time aside) counts once, where a broker may send a message"
    " again before the acknowledgement comes back and each copy is routed and forwarded again; the table has no"
    " `second` column.",
    "a table",
)
LOG_COUNTS = Phrase(
    "log",
    THEN,
    f'the log{WHOSE} has <at least {{least:time}}|{{count:time}}> "{{event}}" event[s]'
    f'[ where {{field:word}} is "{{value:any}}"]{SPAN}',
    'the log for dialog "D1" has no "message dropped" event from second 10',
    "Counts events of one kind, optionally with one field's value (a number may use the open values:"
    ' `"{forward_hop_limit} + 1"`). *at least* where a broker may do it again: a message it sends again while'
    " it has not arrived is routed, forwarded, dropped or deleted again.",
)
SESSION_WAITING = Phrase(
    "log", THEN, 'session "{session}" is waiting', 'session "S2" is waiting', "Its last statement waits."
)
SESSION_EMPTY = Phrase(
    "log",
    THEN,
    'session "{session}" got an empty result',
    'session "S2" got an empty result',
    "Its last statement returned no rows.",
)
SESSION_ROWS = Phrase(
    "log",
    THEN,
    'session "{session}" got the message[s] {messages:rest}',
    'session "S1" got the messages D1:0, D1:1 or D2:0',
    "Its last RECEIVE returned these messages, DIALOG:SEQUENCE, in order; *or* separates the answers the documents"
    " allow alike (they do not say which conversation group a RECEIVE without WHERE takes).",
)
SESSION_GROUP = Phrase(
    "log",
    THEN,
    'session "{session}" got the conversation group of dialog "{dialog}"',
    'session "S1" got the conversation group of dialog "D1"',
    "Its last statement returned the group of that dialog.",
)

# ------------------------------------------------------------------ reproducers
REFUSALS_RECORDED = Phrase(
    "workload",
    GIVEN,
    "a command the implementation refuses is recorded for the checks below",
    "a command the implementation refuses is recorded for the checks below",
    "A refusal is no failure of its step: the Then steps judge it, as the stage does (a reproducer whose commands"
    " one allowed history refuses where another does not).",
)
INVARIANTS_HOLD = Phrase(
    "workload",
    THEN,
    "no invariant of the workload stage is broken",
    "no invariant of the workload stage is broken",
    "The recorded trace keeps the workload stage's invariants.",
)
SAME_AS_REFERENCE = Phrase(
    "workload",
    THEN,
    "the reference engine, making the same allowed choices, gives the same outcome",
    "the reference engine, making the same allowed choices, gives the same outcome",
    "The reference engine, run on the same commands with the implementation's choices, gives the same trace.",
)

PHRASES: dict[str, Phrase] = {name: value for name, value in dict(globals()).items() if isinstance(value, Phrase)}
