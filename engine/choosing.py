"""Where the documents let Service Broker pick "arbitrarily", the engine asks a chooser.

The broker reports every pick in its event log, so a scenario can accept
any allowed outcome and a test can run the suite with another chooser.
"""

from __future__ import annotations

from typing import Protocol

from sbtck.engine.compiling import mypyc_attr

ROUTE = "route"  # RTC-1..4: one route among the candidates of a step
BROKER_INSTANCE = "broker_instance"  # RTM-3: one broker instance among several
DATABASE_ORDER = "database_order"  # RTL-3: the order of the other databases
# RTR-4: whom to ask once the principal is lost - the partner alone, or the lost principal again with it; the
# reference's default sorts first
PROBES = "probes"
PARTNER_ALONE, LOST_PRINCIPAL_TOO = "partner alone", "partner and lost principal"
# ACT-09: who gets the conversation group a procedure's commit releases - a reader waiting for it, or the
# procedure itself, RECEIVEing again at once; the reference's default sorts first
NEXT_READER = "next_reader"
A_WAITING_READER, THE_COMMITTER = "a waiting reader", "the committer"
# which conversation group a RECEIVE or GET CONVERSATION GROUP takes when several are ready: the documents do not
# say; its options come oldest first, the reference's pick
GROUP = "conversation_group"
# which of several sessions waiting on a queue (WAITFOR) is served first when messages become available there: the
# documents do not say (ACT-09 keeps a conversation group to one of them, not to which); its options are the
# sessions able to take something, in the order they began to wait, the reference's pick
WAITER = "waiter"
# whether GET CONVERSATION GROUP is a RECEIVE for ACT-05 (a check "whenever a RECEIVE executes") and ACT-13
# (the time-out ends "after an application calls RECEIVE"): the documents name RECEIVE only, and ACT-07 names
# both; one reading for a whole run, the reference's first
GCG_READING = "get_conversation_group_reading"
A_RECEIVE, NOT_A_RECEIVE = "counts as a RECEIVE", "is not a RECEIVE"
# whether the transmitter reclassifies the dialogs a route change touched (PER-2B): a periodic task, so a rule
# only for an implementation declaring periodic_tasks; for one without, whether its routing ever does is its
# own, and the stage's search asks it (one reading for a whole run, the reference's first)
RECLASSIFYING = "reclassifying"
RECLASSIFIES, NEVER_RECLASSIFIES = "reclassifies touched dialogs", "never reclassifies"
# which waiting dialogs a metadata change has the transmitter reclassify (PER-2B: it "reclassifies all or selected
# dialogs as a side-effect of any metadata changes"): one the changed route could match is always among them, so
# the change is taken up; any other dialog waiting at that instance may be or not. Its options come with the
# reference's pick first: reclassified if it waited since before the change, else left as it is
RECLASSIFIED = "reclassified"
REGISTERS_AGAIN, STAYS_REGISTERED = "registers again", "stays registered"
# in which order the dialogs a reclassification takes register again: the documents give none, and it shows
# where one dialog's routing changes another's (the first asks the dynamic routing service, RTM-4). Asked for each
# next dialog, among those left; the options name dialogs (a reply's with REPLY), the reference's order first
RECLASSIFIED_NEXT = "reclassified_next"
REPLY = " (reply)"
# which later messages RTE-04's acknowledgement carries the target's broker instance for ("o iniciador usa o
# identificador ... para rotear as mensagens subsequentes"): those sent after it, or also those sent before it and
# routed after it, still waiting at the initiator (one reading for a whole run, the reference's first)
ACKNOWLEDGEMENT_READING = "acknowledgement_reading"
SENT_AFTER, ROUTED_AFTER = "messages sent after it", "messages routed after it"
# how a route whose address resolves to the instance itself is taken (RTX-2: the conversation "is treated as
# arriving from outside"): out over the network to itself and back, or at once, without the transport, past its
# dispatcher or through it (the dispatcher "receives messages from the SSB transport", and a message from outside
# comes that way) (one reading for a whole run, the reference's first)
OWN_ADDRESS = "own_address"
OVER_THE_NETWORK, AT_ONCE_FROM_OUTSIDE = "over the network", "at once, as from outside"
AT_ONCE_THROUGH_THE_DISPATCHER = "at once, through the dispatcher"
# what becomes of a QUEUE_ACTIVATION time-out running when the queue's last event notification is dropped: it
# runs out, and the queue monitor looks again then (ACT-13: "when the time-out expires"), or it ends with the
# notification it was the time-out of (one reading for a whole run, the reference's first)
DROPPED_TIME_OUT = "dropped_time_out"
RUNS_OUT, ENDS_WITH_IT = "runs out", "ends with the notification"
# whose memory ACT-07's "no such statement has returned an empty result set for a few seconds" is: the queue
# monitor's (sys.dm_broker_queue_monitors' last_empty_rowset_time), so a monitor created anew knows of no earlier
# empty result, or the queue's, so it does (one reading for a whole run, the reference's first)
EMPTY_MEMORY = "empty_result_memory"
THE_MONITORS, THE_QUEUES = "the queue monitor's", "the queue's"
# which databases PER-5E resumes the clean-up of acknowledged messages in: the document names "the databases that
# have any dialogs", in the sentence about those whose broker failed to start; whether a database whose broker has
# not started runs a background task of it is not said (one reading for a whole run, the reference's first)
CLEANUP_READING = "cleanup_reading"
STARTED_BROKERS, ANY_WITH_DIALOGS = "databases whose broker started", "any database with dialogs"
# when a forwarder reports message_forwarded for a message that must wait for its connection: when it sends the
# message on, or already when it decides to; the documents have no such report, and the contract said neither (one
# reading for a whole run, the reference's first)
FORWARD_REPORTED = "forward_reported"
WHEN_SENT_ON, WHEN_DECIDED = "when sent on", "when decided"
# when the queue monitor looks after a trigger (ACT-05: "whenever a new message arrives ..., a RECEIVE executes"):
# once the trigger's instant has settled (a new message served to the readers waiting for it, a procedure's
# commit and next RECEIVE done), or at the trigger itself (before a waiting reader takes a new message or what a
# rollback returned), where an activated procedure's step (its commit, the waiting reader that gets the group it
# releases, its next RECEIVE) is one trigger, looked at when done. The documents give the sessions of one instant
# no order; they do forbid a look between a procedure's commit and its next RECEIVE: "as long as ... the second
# queue reader remains running, the queue monitor does not start another queue reader" (one reading for a whole
# run, the reference's first)
CHECK_MOMENT = "check_moment"
ONCE_SETTLED, AT_THE_TRIGGER = "once the instant has settled", "at the trigger"
# when the transport finds a connection broken by the kit's network fault (an instance that cannot be reached):
# at once, or only when the connection is next used or wanted, as TCP finds it; the documents say neither, and the
# fault is the kit's own (one reading for a whole run, the reference's first)
BROKEN_NOTICED = "broken_connection_noticed"
AT_ONCE_NOTICED, AT_NEXT_USE = "at once", "at its next use"
# whether the last instant of a span of the documents counts as passed, where a check falls on it exactly: "for 15
# seconds after disconnection" and 60 after a failed attempt (a destination suppressed), "idle for the past 90
# seconds" (a connection), "in 10 seconds since their arrival" (a dispatcher's buffer), "within 60 seconds of being
# received" (a forwarded message), "for a few seconds" (ACT-07's quiet window). The documents do not say; each is
# one reading for a whole run, asked only at such an instant (``Span``), the reference's first
SUPPRESSION_SPAN, IDLE_SPAN, STALE_SPAN = "suppression_span", "idle_span", "stale_span"
FORWARD_SPAN, QUIET_SPAN = "forward_span", "quiet_span"
PASSED_AT_ITS_END, NOT_YET_PASSED = "passed at its last instant", "not yet passed at its last instant"
# what follows when the LOCAL route chosen finds no service in the instance (RTL-2, RTL-3) and no other route
# matched: the routing document says Service Broker "may return to step 2 and choose another route", so the message
# is dropped, or, choosing again and finding none, the conversation is delayed ("failure to find a matching route
# is not considered an error") and matched again after the time-out; chosen again, a network or TRANSPORT route that
# matched takes it. Asked of each such message there and then (the reference's first: dropped)
LOCAL_MISS = "local_miss"
DROPPED, CHOSEN_AGAIN = "dropped", "chosen again, delayed"
# and, chosen again, whether the LOCAL route passed over is reported as chosen first (route_chosen) or not at all,
# as where RTC-2 passes over LOCAL routes: a decision trace may tell the return to step 2 either way. Asked of
# each such message there and then (the reference's first: reported)
LOCAL_PASSED_OVER = "local_passed_over"
REPORTED_FIRST, NOT_REPORTED = "reported as chosen first", "not reported"
# how RTR-5's "ambos os endereços são tentados novamente" retries a message waiting for a mirrored route's
# principal: routed again from matching (and the route chosen again), or only the route's two addresses asked again
# while the route it chose stands (one reading for a whole run, the reference's first)
PRINCIPAL_RETRY = "principal_retry"
ROUTED_AGAIN, PAIR_ASKED_AGAIN = "routed again", "its pair asked again"
# whether a mirrored route keeps the principal it learnt once that principal is lost (RTR-4), taking it for the
# principal still, to be found lost again at the next message or retry, or forgets it, so that both addresses are
# asked anew as at first use (RTR-2): RTR-5 retries "o endereço da principal e o endereço do parceiro" and says no
# more of what the route remembers (one reading for a whole run, the reference's first: kept)
LOST_PRINCIPAL = "lost_principal"
KEPT, FORGOTTEN = "kept until the partner claims the role", "forgotten"
# what an instance asked by RTR-2's "solicitação para ambos os endereços para determinar qual instância é atualmente a
# principal" claims the role for, where the route names no broker instance and the conversation names one: the
# database of that broker instance (the reference's first), or the database of the route's service. The documents
# say the request is sent and nothing of what it names; the two differ only where an instance holds the service but
# not the conversation's broker instance (the message then goes there, and RTL-2 drops it). One reading for a whole
# run, asked only where the two answers differ
PROBE_SUBJECT = "probe_subject"
OF_THE_BROKER_INSTANCE, OF_THE_SERVICE = "the conversation's broker instance", "the route's service"
# whether a message SENT while an earlier message of its conversation waits at another instance only (a forwarder
# or the target's instance, where no route matched it yet; or its origin's own, handled there as from outside
# (RTX-2)) is held at its origin behind it, or routed and sent on:
# the routing document marks "the conversation" delayed where matching found no route, and no document says that
# an instance the conversation passed through on its way holds its later messages for it, or sends them on to wait
# behind it where it waits: no document says, so it is asked of each such message (a broker may hold behind one
# waiting at its own instance, RTX-2, and send on past one at another), the reference's first held
HELD_ELSEWHERE = "held_elsewhere"
# and which of the two a broker does where nothing shows otherwise: asked once for a run (a Reading, though not one
# of READINGS: the search departs from it at the cost of one pick, not for free, as a free reading doubles the tree
# of every world the search must explore), offered first at each message; the search then departs from it message by
# message only where the implementation's events show it did
HELD_ELSEWHERE_MOSTLY = "held_elsewhere_mostly"
HELD_AT_ITS_ORIGIN, SENT_ON = "held at its origin", "routed and sent on"
# and whether a message arriving from outside where an earlier message of its conversation waits (delayed, or for
# its connection) waits behind it, or is matched on its own, as any message that arrives (and then waits in line
# there if it finds no way either): the documents mark "the conversation" delayed, and say no more of its later
# messages. Asked of each such arrival, the reference's first
ARRIVES_BEHIND = "arrives_behind"
WAITS_BEHIND_IT, MATCHED_ON_ITS_OWN = "waits behind it", "matched on its own"
# and whether a message waiting behind an earlier one of its conversation that PER-5B's forwarder deletes where it
# waits follows it at once, as it would had it gone on, or stays where it waits (the reference's first: until the
# forwarder deletes it too, or for ever at its origin). Asked of each such message, at the deletion
BEHIND_A_DELETED = "behind_a_deleted_message"
STAYS_BEHIND, FOLLOWS_AT_ONCE = "stays where it waits", "follows at once"
# and whether a message matched on its own (ARRIVES_BEHIND) and delayed where an earlier message of its
# conversation waits is matched again at its own time-out, or waits for the one ahead of it (the reference's first,
# as if it had waited behind it): the routing document runs matching again "depois de um tempo limite" once "the
# conversation" is marked delayed, and this message's own matching marked it so. Asked of each such message at its
# time-out, with ARRIVES_BEHIND's options
RETRIED_BEHIND = "retried_behind"
# and whether such a message (delayed by its own matching behind an earlier one), when the one ahead of it goes on,
# follows it at once (the reference's first, as a line does) or waits for its own time-out, as a message matched on
# its own would. Asked of each such message when the one ahead goes on
AHEAD_GOES_ON = "ahead_goes_on"
WAITS_FOR_ITS_TIME_OUT = "waits for its own time-out"
# which comes first where a delayed message's time-out (RTM-8) and its instance's 2nd timer notification (PER-2B's
# reclassification) fall on one instant: the documents order neither before the other. The time-out first (the
# reference's pick: the message was routed again, and no longer waits as it did when the notification came), or the
# notification first, whose reclassification finds it still waiting, may name it and registers it again (the
# routing is the same: it is matched again at that instant either way). Asked of each such message there and then
TIME_OUT_AND_NOTIFICATION = "time_out_and_notification"
TIME_OUT_FIRST, NOTIFICATION_FIRST = "the time-out first", "the notification first"
# where the queue monitor looks at the trigger (CHECK_MOMENT) and a reader waits on the queue, which comes first
# at a new message's arrival, or at what a rollback returned: the monitor's look at it, or the waiting reader
# taking it (and the monitor's look at that RECEIVE). ACT-05 has the monitor look "whenever" the message arrives,
# and the documents give a waiting session and the monitor no order. Asked of each such arrival or rollback and
# queue (the reference's first: the look). Where the monitor looks once the instant has settled, asked of the same
# arrivals and rollbacks: whether the look at the arrival (or the rollback) comes before the look at the RECEIVE of
# the reader it served, which ACT-06 can tell apart (a procedure the first look starts is running at the second);
# both are looks of one instant, and ACT-05 gives them no order (the reference's first: the reader's look)
ARRIVAL_LOOK = "arrival_look"
LOOK_FIRST, READER_FIRST = "the monitor's look first", "the waiting reader first"
# which of the activated procedures of a queue whose work ends at one instant takes its step (commit, next RECEIVE,
# the look at it where the monitor looks at the trigger) first: the documents give concurrent sessions no order, and
# it shows in which next RECEIVE takes a group first whenever the monitor looks. Asked of each such step as it falls
# due: as due (the reference's first, in the order the steps were set), or after the others (once)
STEP_ORDER = "step_order"
AS_DUE, AFTER_THE_OTHERS = "as due", "after the other steps of its instant"
# which comes first where a timer notification and an activated procedure's step (the end of its work: its commit
# and next RECEIVE) fall on one instant: the documents order neither before the other, and the queue monitor's look
# at the notification (PER-1A) sees the group still locked, or released and taken again. Asked of each such instant
# and queue (the options in the reference's order of preference: the step first)
TIMER_AND_STEP = "timer_and_step"
STEP_FIRST, TIMER_FIRST = "the procedure's step first", "the timer notification's look first"
# whether a group of identical routes (RTC-0: alike in broker instance, service name and address, mirror address
# aside) "specifies a mirror address" (RTC-1) when only some of its members do: the documents do not say. As the
# member that names it by default (the first by name, the reference's pick), or as any member that specifies one,
# named then by such a member. Asked at each choosing where such a group is among the candidates
MIXED_GROUP = "mixed_identical_group"
AS_ITS_FIRST_MEMBER, AS_ANY_MIRRORED_MEMBER = "as its first member", "as any member with a mirror address"
# which reason a message buffered in the dispatcher is deleted for where it is both out of order and stale (PER-1C:
# "deletes all out-of-order and stale messages", no priority given): out of order (the reference's first) or stale.
# Asked of each such message there and then
DELETED_AS = "deleted_as"
OUT_OF_ORDER, STALE = "out of order", "stale"
# whether messages waiting for a connection go on it as soon as a SEND opens it (a connection opened when the
# transport connects at a SEND, PER-2A), or wait until the transmitter is next notified, as they would had no SEND
# opened it: PER-2A says the transmitter, "once notified", connects to destinations "that have pending messages",
# and nothing keeps a pending message off a connection that is already open. Asked at each such opening (the
# reference's first: at the next notification)
PENDING_ON_OPEN = "pending_on_open"
AT_THE_NEXT_NOTIFICATION, ON_IT_AT_ONCE = "at the next notification", "on it at once"
# in which order the instances' periodic tasks run where their timer notifications fall on one instant: each
# instance has its own timer ("SSB receives notifications every 5 seconds from the SQL engine's timer framework"),
# and the documents order neither the instances nor one instance's tasks against another's. Task by task across the
# instances (the reference's first), or each instance's tasks together, in the topology's order. Asked at each
# notification of a world of several instances; it shows at that instant or not at all (SHOWS_AT_ITS_INSTANT)
TIMER_ORDER = "timer_order"
TASK_BY_TASK, INSTANCE_BY_INSTANCE = "task by task", "instance by instance"
# the choices whose other option shows, if at all, in the events of the instant it was asked at: a search whose first
# difference comes later need not try it (what that instant showed agreed)
SHOWS_AT_ITS_INSTANT = frozenset({TIMER_ORDER})
# how many task handlers an instance starts (PER-1B: it "creates up to 2 times the number of CPU's task-handlers"):
# asked of each instance as it starts, its options counts from twice its CPUs down to one, the reference's first
TASK_HANDLERS = "task_handlers"
# the choices asked once for a whole run, about no one message or session (each a Reading)
READINGS = frozenset(
    {
        GCG_READING,
        RECLASSIFYING,
        CHECK_MOMENT,
        FORWARD_REPORTED,
        ACKNOWLEDGEMENT_READING,
        OWN_ADDRESS,
        CLEANUP_READING,
        DROPPED_TIME_OUT,
        EMPTY_MEMORY,
        BROKEN_NOTICED,
        SUPPRESSION_SPAN,
        IDLE_SPAN,
        STALE_SPAN,
        FORWARD_SPAN,
        QUIET_SPAN,
        PRINCIPAL_RETRY,
        PROBE_SUBJECT,
    }
)
# readings asked once for a run that cost the search a pick to depart from, not none: each free reading doubles the
# tree of every world the search explores (design.md, decision 12)
COSTLY_READINGS = frozenset({LOST_PRINCIPAL, HELD_ELSEWHERE_MOSTLY})
# the kinds whose options are offered in the reference's order of preference, not compared by name
OFFERED_IN_ORDER = (
    READINGS
    | COSTLY_READINGS
    | {
        GROUP,
        HELD_ELSEWHERE,
        WAITER,
        RECLASSIFIED,
        RECLASSIFIED_NEXT,
        TASK_HANDLERS,
        TIMER_AND_STEP,
        ARRIVAL_LOOK,
        STEP_ORDER,
        DELETED_AS,
        PENDING_ON_OPEN,
        TIMER_ORDER,
        MIXED_GROUP,
        BEHIND_A_DELETED,
        ARRIVES_BEHIND,
        RETRIED_BEHIND,
        AHEAD_GOES_ON,
        LOCAL_MISS,
        LOCAL_PASSED_OVER,
        TIME_OUT_AND_NOTIFICATION,
    }
)
# the readings that are open only to an implementation without this capability (a rule of it otherwise)
OPEN_WITHOUT = {RECLASSIFYING: "periodic_tasks"}
# the choices that show only to an implementation with this capability: without it, no trace tells one pick from
# another (how many task handlers run shows in task_handlers_started and the periodic state alone), so a search
# takes the reference's pick rather than try each
OPEN_WITH = {TASK_HANDLERS: "periodic_tasks"}


# what each option of a choice would send the message to: a route's addresses, a broker instance's routes'
Addresses = dict[str, tuple[str, ...]]


class Chooser(Protocol):
    def about(self, instance: str, message: dict[str, object]) -> None:
        """Which message the next choices are for (its dialog, sequence number and direction), and when (at_ms)."""
        ...

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str: ...

    def order(self, kind: str, options: list[str]) -> list[str]: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class FirstChooser:
    """Takes the first option in name order: the reference engine's default."""

    def about(self, instance: str, message: dict[str, object]) -> None:
        pass

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        return options[0] if kind in OFFERED_IN_ORDER else sorted(options)[0]

    def order(self, kind: str, options: list[str]) -> list[str]:
        return list(options) if kind in OFFERED_IN_ORDER else sorted(options)


class LastChooser(FirstChooser):
    """Takes the last: a second, equally allowed, set of choices (a reading open only to some keeps the first)."""

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        if kind in OPEN_WITHOUT:
            return options[0]
        return options[-1] if kind in OFFERED_IN_ORDER else sorted(options)[-1]

    def order(self, kind: str, options: list[str]) -> list[str]:
        return list(reversed(options)) if kind in OFFERED_IN_ORDER else sorted(options, reverse=True)


class Reading:
    """One of READINGS: asked of the chooser the first time it matters, and the same for the rest of the run."""

    def __init__(self, kind: str, *options: str) -> None:
        self.kind, self.options = kind, list(options)
        self.taken: str | None = None

    def of(self, chooser: Chooser) -> str:
        if self.taken is None:
            self.taken = chooser.choose(self.kind, self.options)
        return self.taken


class Span:
    """One span of the documents, as the reading of its kind takes its last instant."""

    def __init__(self, kind: str) -> None:
        self.reading = Reading(kind, PASSED_AT_ITS_END, NOT_YET_PASSED)

    def over(self, now_ms: int, end_ms: int, chooser: Chooser) -> bool:
        """Has the span that ends at END_MS passed at NOW_MS? At END_MS itself, as its reading says."""
        if now_ms != end_ms:
            return now_ms > end_ms
        return self.reading.of(chooser) == PASSED_AT_ITS_END
