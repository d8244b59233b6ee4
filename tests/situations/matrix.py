"""The situation matrix: each state-changing command of the contract, in each state that matters for an area's
rules, and which scenarios of the suite set each cell up.

A list of rules says what is tested in its plain form; faults hide in the situations around it (a RECEIVE while
procedures run at the maximum, a route created while a dialog waits, an acknowledgement while the clean-up is
stopped). A cell is one command in one such state. The states are read from what any broker shows - the events
the reference engine reported before the command, and the commands - never from the engine's reasoning, so the
matrix says in an implementation's own terms what the scenarios exercise.

The commands of an area are those the contract gives its capabilities (``Command.needs``), with the commands
every implementation takes that change the area's state (SHARED). A cell that cannot arise by the documents or
the contract is set aside in IMPOSSIBLE, with why.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbtck.contract import COMMANDS
from sbtck.observations import Kind

# an area, and the capabilities whose commands belong to it
AREAS: dict[str, tuple[str, ...]] = {
    "activation": ("activation", "external_activation"),
    "routing": ("routing", "mirroring", "forwarding", "dynamic_routing"),
    "periodic": ("periodic_tasks",),
}
# the commands every implementation takes (needs None) that change an area's state; a query_view looks, the start
# is where every world begins
SHARED: dict[str, tuple[str, ...]] = {
    "activation": (
        "send",
        "receive",
        "get_conversation_group",
        "commit",
        "rollback",
        "exit_procedure",
        "advance_time",
    ),
    "routing": ("send", "advance_time"),
    "periodic": ("send", "advance_time"),
}


def commands(area: str) -> tuple[str, ...]:
    own = tuple(kind for kind, cls in COMMANDS.items() if cls.needs in AREAS[area])
    return SHARED[area] + own


Key = tuple[str, str, str]  # a queue: instance, database, queue


@dataclass
class Queue:
    max_readers: int = 0
    on: bool = False
    waiting: int = 0  # messages arrived and not yet received
    running: set[str] = field(default_factory=set)  # tasks of activated procedures
    notified: bool = False  # an event notification's time-out runs
    readers: set[str] = field(default_factory=set)  # sessions in WAITFOR
    held_by: set[str] = field(default_factory=set)  # sessions whose open transaction received from it
    withheld: bool = False  # the last activation the monitor found necessary was withheld


@dataclass
class Instance:
    dispatcher: Counter[tuple[Any, ...]] = field(default_factory=Counter)  # buffered, not yet saved or deleted
    # held in its forwarder's memory (PER-5B): a message from another instance that waits here, until it goes on,
    # is deleted or dropped; a wait shows as its transmission_pending, conversation_delayed or routing_requested,
    # or as a message_forwarded reported when decided, at an instance that did not send it
    forwarder: set[tuple[Any, ...]] = field(default_factory=set)
    queued: set[tuple[Any, ...]] = field(default_factory=set)  # in its transmission queue: sent, not yet sent on
    handlers_failed: bool = False
    cleanup_stopped: set[str] = field(default_factory=set)  # the databases whose clean-up stopped, not resumed


@dataclass
class Dialog:
    sent: int = 0
    delayed: set[tuple[Any, ...]] = field(default_factory=set)
    pending: set[tuple[Any, ...]] = field(default_factory=set)  # waiting in a transmission queue
    requested: set[tuple[Any, ...]] = field(default_factory=set)  # a dynamic routing request unanswered
    # (instance, message): held by that instance's forwarder - it came there from outside and waits there (delayed,
    # for a connection, for a principal; or its forwarding is reported before it is sent on), until it is sent on,
    # dropped or deleted there, or arrives
    forwarded: set[tuple[Any, ...]] = field(default_factory=set)
    unacknowledged: bool = False
    matched: bool = False
    dropped: bool = False
    probed: bool = False  # a mirror pair was asked which is principal
    lost: bool = False  # and none claims it now: no partner answered principal since, or the principal was lost
    known: bool = False  # a partner answered principal, and has not been lost since


def _message(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e.get("dialog"), e.get("from_target"), e.get("message_sequence_number"))


@dataclass
class World:
    """What the events and commands of one scenario show, up to a moment."""

    queues: dict[Key, Queue] = field(default_factory=dict)
    services: dict[str, Key] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    dialogs: dict[str, Dialog] = field(default_factory=dict)
    sessions: dict[str, bool] = field(default_factory=dict)  # in an open transaction
    received: dict[str, set[Key]] = field(default_factory=dict)  # by a session, in its transaction
    ends: dict[str, tuple[str, str]] = field(default_factory=dict)  # a dialog's from and to service
    origin: dict[tuple[Any, ...], str] = field(default_factory=dict)  # a message: the instance it was sent from
    came: dict[tuple[Any, ...], set[str]] = field(default_factory=dict)  # a message: the instances it was sent to

    def start(self, topology: dict[str, Any]) -> None:
        """The topology as the wire carries it (docs/protocol.md): lists of named objects."""
        for instance in topology["instances"]:
            self.instances[instance["name"]] = Instance()
            for database in instance["databases"]:
                where = (instance["name"], database["name"])
                for queue in database["queues"]:
                    activation = queue["activation"]
                    self.queues[(*where, queue["name"])] = Queue(
                        max_readers=activation["max_queue_readers"], on=activation["status"] == "ON"
                    )
                for service in database["services"]:
                    self.services.setdefault(service["name"], (*where, service["queue"]))

    def queue(self, e: dict[str, Any]) -> Queue:
        key = (e.get("instance", ""), e.get("database", ""), e.get("queue", ""))
        return self.queues.setdefault(key, Queue())

    def instance(self, name: str) -> Instance:
        return self.instances.setdefault(name, Instance())

    def dialog(self, name: str) -> Dialog:
        return self.dialogs.setdefault(name, Dialog())

    def command(self, c: dict[str, Any]) -> None:
        kind = c["kind"]
        if kind == "alter_queue":
            q = self.queue(c["queue"])
            if c.get("status") is not None:
                q.on = str(c["status"]).upper() == "ON"
            if c.get("max_queue_readers") is not None:
                q.max_readers = int(c["max_queue_readers"])

    def event(self, e: dict[str, Any]) -> None:
        kind = e["kind"]
        if kind == Kind.ACTIVATION_NECESSARY:
            self.queue(e).withheld = False
        elif kind == Kind.ACTIVATION_WITHHELD:
            self.queue(e).withheld = True
        elif kind == Kind.PROCEDURE_STARTED:
            self.queue(e).running.add(str(e.get("task")))
        elif kind == Kind.PROCEDURE_EXITED:
            self.queue(e).running.discard(str(e.get("task")))
        elif kind == Kind.EVENT_NOTIFICATION:
            self.queue(e).notified = True
        elif kind == Kind.ACTIVATION_TIME_OUT:
            self.queue(e).notified = False
        elif kind == Kind.MONITOR_REMOVED:
            # no monitor is left to withhold or notify: a time-out it ran ends with it, reported or not (the
            # last notification dropped on a queue whose activation is off)
            q = self.queue(e)
            q.notified = q.withheld = False
        elif kind == Kind.MESSAGE_ARRIVED:
            self.queue(e).waiting += 1
            d = self.dialog(e["dialog"])
            d.forwarded = {held for held in d.forwarded if held[1:] != _message(e)}
            d.pending.discard(_message(e))
            d.delayed.discard(_message(e))
            for instance in self.instances.values():
                instance.queued.discard(_message(e))
            if e.get("instance") in self.instances:  # saved from its dispatcher's buffer, if it was there
                self.instances[e["instance"]].dispatcher.pop(_message(e), None)
        elif kind in (Kind.ROWS_RETURNED, Kind.EMPTY_RESULT):
            q = self.queue(e)
            q.waiting = max(0, q.waiting - len(e.get("rows") or []))
            q.readers.discard(e.get("session", ""))
            q.notified = False if kind == Kind.ROWS_RETURNED else q.notified
            session = e.get("session", "")
            if self.sessions.get(session) and e.get("rows"):
                key = (e.get("instance", ""), e.get("database", ""), e.get("queue", ""))
                self.received.setdefault(session, set()).add(key)
                q.held_by.add(session)
        elif kind == Kind.READER_WAITING:
            self.queue(e).readers.add(e.get("session", ""))
        elif kind in (Kind.TRANSACTION_COMMITTED, Kind.TRANSACTION_ROLLED_BACK):
            session = e.get("session", "")
            for key in self.received.pop(session, set()):
                self.queues[key].held_by.discard(session)
                if kind == Kind.TRANSACTION_ROLLED_BACK:
                    self.queues[key].waiting += int(e.get("returned") or 0)
            self.sessions[session] = False
        elif kind == Kind.MESSAGE_SENT:
            self.origin[_message(e)] = e["instance"]
            self.instance(e["instance"]).queued.add(_message(e))
            d = self.dialog(e["dialog"])
            d.sent += 1
            d.unacknowledged = True
        elif kind == Kind.ACKNOWLEDGED:
            self.dialog(e["dialog"]).unacknowledged = False
        elif kind == Kind.ROUTES_MATCHED:
            self.dialog(e["dialog"]).matched = bool(e.get("routes"))
        elif kind == Kind.CONVERSATION_DELAYED:
            self.dialog(e["dialog"]).delayed.add(_message(e))
            self._waits(e)
        elif kind == Kind.ROUTING_REQUESTED:
            self.dialog(e["dialog"]).requested.add(_message(e))
            self._waits(e)
        elif kind in (Kind.ROUTE_CHOSEN, Kind.MESSAGE_DROPPED):
            d = self.dialog(e["dialog"])
            d.requested.discard(_message(e))
            d.delayed.discard(_message(e))
            d.dropped = d.dropped or kind == Kind.MESSAGE_DROPPED
            if kind == Kind.MESSAGE_DROPPED:
                self.instance(e["instance"]).queued.discard(_message(e))
                self.instance(e["instance"]).forwarder.discard(_message(e))
                d.forwarded.discard((e["instance"], *_message(e)))
        elif kind == Kind.TRANSMISSION_PENDING:
            d = self.dialog(e["dialog"])
            # a message that waits for want of a route (delayed, a routing request out) or for a principal (none
            # claims the role) is not waiting for a connection, though it is as pending in the transmission queue
            if _message(e) not in d.delayed | d.requested and not d.lost:
                d.pending.add(_message(e))
            # a forwarder's memory is no transmission queue (PER-5B: "not persisted in any queue")
            if not self._waits(e):
                self.instance(e["instance"]).queued.add(_message(e))
        elif kind in (Kind.MESSAGE_TRANSMITTED, Kind.MESSAGE_LOST_IN_TRANSIT):
            d = self.dialog(e["dialog"])
            d.pending.discard(_message(e))
            d.forwarded.discard((e["instance"], *_message(e)))
            self.instance(e["instance"]).queued.discard(_message(e))
            self.instance(e["instance"]).forwarder.discard(_message(e))  # it goes on
            if e.get("to_instance"):
                self.came.setdefault(_message(e), set()).add(e["to_instance"])
        elif kind == Kind.MESSAGE_FORWARDED:
            # reported when sent on (then a transmission follows) or already when decided for a message that waits
            self._waits(e)
        elif kind == Kind.FORWARDED_MESSAGE_DELETED:
            self.instance(e["instance"]).forwarder.discard(_message(e))
            self.dialog(e["dialog"]).forwarded.discard((e["instance"], *_message(e)))
        elif kind == Kind.PRINCIPAL_PROBE:
            d = self.dialog(e["dialog"])
            d.probed = True
            if e.get("answer") == "principal":
                d.known, d.lost = True, False
            elif not d.known:
                d.lost = True  # asked, and no partner has claimed the role
        elif kind == Kind.PRINCIPAL_LOST:
            d = self.dialog(e["dialog"])
            d.known, d.lost = False, True
        elif kind == Kind.DISPATCHER_BUFFERED:
            self.instance(e["instance"]).dispatcher[_message(e)] += 1
        elif kind == Kind.DISPATCHER_DELETED:
            self.instance(e["instance"]).dispatcher.pop(_message(e), None)
        elif kind == Kind.TASK_HANDLERS_FAILED:
            self.instance(e["instance"]).handlers_failed = True
        elif kind == Kind.TASK_HANDLERS_RESTARTED:
            self.instance(e["instance"]).handlers_failed = False
        elif kind == Kind.ACK_CLEANUP_STOPPED:
            self.instance(e["instance"]).cleanup_stopped.add(e.get("database", ""))
        elif kind == Kind.ACK_CLEANUP_RESUMED:
            self.instance(e["instance"]).cleanup_stopped.discard(e.get("database", ""))
        elif kind == Kind.DIALOG_BEGUN:
            self.ends[e["dialog"]] = (e.get("from_service", ""), e.get("to_service", ""))

    def _waits(self, e: dict[str, Any]) -> bool:
        """A message waits at an instance: in its forwarder when it came there from outside (from another instance,
        or from its own by a route to its own address, RTX-2), in its transmission queue when it was sent there.
        Whether it is the forwarder's."""
        message, where = _message(e), e["instance"]
        if where not in self.came.get(message, ()) and self.origin.get(message, where) == where:
            return False
        self.dialog(e["dialog"]).forwarded.add((where, *message))
        self.instance(where).forwarder.add(message)
        return True

    def begin(self, session: str) -> None:
        self.sessions[session] = True


# ------------------------------------------------------------------ the states, each read for one command


@dataclass(frozen=True)
class Moment:
    """A command, the world before it, and the instant's timer notifications (which may come with the command)."""

    world: World
    command: dict[str, Any]
    at_the_instant: frozenset[tuple[str, str]]  # (instance, task) of the notifications at the command's instant

    def queues(self) -> list[Queue]:
        """The queues the command touches: the one it names, the session's, the dialog's target; or all."""
        w, c = self.world, self.command
        if isinstance(c.get("queue"), dict):
            return [w.queue(c["queue"])]
        if "session" in c:
            keys = w.received.get(c["session"], set())
            readers = [q for q in w.queues.values() if c["session"] in q.readers]
            return [w.queues[k] for k in keys] + readers or list(w.queues.values())
        if c["kind"] == "send" and c["dialog"] in w.ends:
            # where the message is for: the service at the other end, by name (what a broker would locate)
            service = w.ends[c["dialog"]][0 if c.get("from_target") else 1]
            if service in w.services:
                return [w.queues.setdefault(w.services[service], Queue())]
        return list(w.queues.values())

    def dialogs(self) -> list[Dialog]:
        w, c = self.world, self.command
        if "dialog" in c and c["kind"] != "begin_dialog":
            return [w.dialog(c["dialog"])]
        return list(w.dialogs.values())

    def instances(self) -> list[Instance]:
        w, c = self.world, self.command
        if c.get("instance") in w.instances:
            return [w.instances[c["instance"]]]
        return list(w.instances.values())

    def notified(self, *tasks: str) -> bool:
        names = {c for c in (self.command.get("instance"),) if c} or {i for i, _ in self.at_the_instant}
        return any(i in names and (not tasks or t in tasks) for i, t in self.at_the_instant)


Holds = Callable[[Moment], bool]
EVERY = ("*",)


@dataclass(frozen=True)
class State:
    """A state that matters for an area's rules, and the commands whose outcome it can change (EVERY: all of the
    area's); the other commands leave what its rules decide as it was."""

    name: str
    holds: Holds
    commands: tuple[str, ...] = EVERY


# the commands that make a queue monitor look (ACT-05: an arrival, a RECEIVE, a rollback, all procedures exited,
# an ALTER QUEUE, a timer notification) or start and end what it looks at (an event notification); the other
# commands of the area change only the locks a RECEIVE meets
LOCKS = ("receive", "get_conversation_group", "commit", "rollback")
# the commands whose outcome a periodic task's notification at their instant can change: the task's own fault or
# switch, and the messages it handles
AT = {
    "message dispatcher": ("send", "set_dispatcher_saving"),
    "transmitter": ("send", "fail_transmission", "lose_in_transit"),
    "transport connections": ("send", "drop_connection"),
    "idle connections": ("send", "drop_connection"),
    "forwarder": ("send",),
    "task handlers": ("fail_task_handlers",),
    "broker start": ("create_master_key",),
    "acknowledged message clean-up": ("send", "stop_ack_cleanup"),
}


# the commands that change what a mirror pair's answers decide: a message to route, time for the retries, the routes
# naming the pair, and the pair's own instances
MIRRORS = ("send", "advance_time", "create_route", "alter_route", "drop_route", "set_reachable", "failover")


def _notified(task: str) -> State:
    return State(f"at the {task} notification", lambda m: m.notified(task), AT[task])


STATES: dict[str, tuple[State, ...]] = {
    "activation": (
        State(
            "idle",
            lambda m: any(not q.running and not q.waiting and not q.notified and not q.readers for q in m.queues()),
        ),
        State(
            "messages waiting, no reader",
            lambda m: any(q.waiting and not q.running and not q.readers for q in m.queues()),
        ),
        State("activation found necessary and withheld", lambda m: any(q.withheld for q in m.queues())),
        State(
            "procedures running below the maximum",
            lambda m: any(0 < len(q.running) < q.max_readers for q in m.queues()),
        ),
        State(
            "procedures running at the maximum",
            lambda m: any(q.running and len(q.running) >= q.max_readers for q in m.queues()),
        ),
        State("activation off while messages wait", lambda m: any(not q.on and q.waiting for q in m.queues())),
        State("a notification time-out running", lambda m: any(q.notified for q in m.queues())),
        State("an open transaction that received", lambda m: any(q.held_by for q in m.queues()), EVERY),
        State("a reader waiting in WAITFOR", lambda m: any(q.readers for q in m.queues()), EVERY),
    ),
    "routing": (
        State("no route matched", lambda m: any(d.sent and not d.matched for d in m.dialogs())),
        State("routes matched", lambda m: any(d.matched for d in m.dialogs())),
        State("a message delayed", lambda m: any(d.delayed or d.requested for d in m.dialogs())),
        State("a message waiting for a connection", lambda m: any(d.pending for d in m.dialogs())),
        State("a mirror pair answering", lambda m: any(d.probed and not d.lost for d in m.dialogs()), MIRRORS),
        State("no partner of a mirror pair principal", lambda m: any(d.lost for d in m.dialogs()), MIRRORS),
        State("a message held by a forwarder", lambda m: any(d.forwarded for d in m.dialogs())),
    ),
    "periodic": (
        State("between timer notifications", lambda m: not m.notified()),
        *(_notified(task) for task in AT),
        State(
            "the dispatcher holding a message",
            lambda m: any(i.dispatcher for i in m.instances()),
            ("send", "advance_time", "set_dispatcher_saving", "fail_task_handlers"),
        ),
        State(
            "a forwarder holding a message", lambda m: any(i.forwarder for i in m.instances()), ("send", "advance_time")
        ),
        State(
            "a transmission queue holding a message",
            lambda m: any(i.queued for i in m.instances()),
            ("send", "advance_time", "drop_connection", "fail_transmission", "lose_in_transit"),
        ),
        State(
            "task handlers failed",
            lambda m: any(i.handlers_failed for i in m.instances()),
            ("send", "advance_time", "fail_task_handlers"),
        ),
        State(
            "the acknowledged-message clean-up stopped",
            lambda m: any(i.cleanup_stopped for i in m.instances()),
            ("send", "advance_time", "stop_ack_cleanup"),
        ),
    ),
}


def _matters(area: str, state: State, command: str) -> bool:
    if state.commands != EVERY:
        return command in state.commands
    return (
        area != "activation"
        or command not in ("commit", "get_conversation_group")
        or state.name
        in (
            "an open transaction that received",
            "a reader waiting in WAITFOR",
            "messages waiting, no reader",
        )
    )


def cells() -> Iterator[tuple[str, str, str]]:
    for area, states in STATES.items():
        for command in commands(area):
            for state in states:
                if _matters(area, state, command):
                    yield area, command, state.name


def situations(steps: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> Iterator[tuple[str, str, str]]:
    """The cells one scenario sets up, from its commands and the events each answered."""
    world = World()
    steps = list(steps)
    at: dict[tuple[str, int], set[str]] = {}
    for _, events in steps:
        for e in events:
            if e["kind"] == Kind.TIMER_NOTIFICATION:
                at.setdefault((e["instance"], e["at_ms"]), set()).update(e.get("tasks") or [])
    for command, events in steps:
        if command["kind"] == "start":
            world.start(command["topology"])
        # the events a command's answer holds before its instant are time passing up to it
        before = next((i for i, e in enumerate(events) if e["at_ms"] >= command["at_ms"]), len(events))
        for e in events[:before]:
            world.event(e)
        instant = frozenset((i, t) for (i, ms), tasks in at.items() if ms == command["at_ms"] for t in tasks)
        moment = Moment(world, command, instant)
        for area, states in STATES.items():
            if command["kind"] in commands(area):
                for state in states:
                    if _matters(area, state, command["kind"]) and state.holds(moment):
                        yield area, command["kind"], state.name
        world.command(command)
        if command["kind"] == "begin_transaction":
            world.begin(command["session"])
        for e in events[before:]:
            world.event(e)


# cells that cannot arise, by the documents or the contract, each with why
IMPOSSIBLE: dict[tuple[str, str, str], str] = {
    ("periodic", "fail_task_handlers", "task handlers failed"): (
        "a second handler of the instance failing while one is down needs two, and a broker may run one: it "
        '"creates up to 2 times the number of CPU\'s task-handlers" (periodic tasks), so one with its only handler '
        "down has none left that 'count task handlers of the instance fail' (docs/protocol.md) could name"
    ),
    # both states have no procedure running on the queue, and exit_procedure names one that runs there
    ("activation", "exit_procedure", "idle"): (
        "docs/protocol.md, exit_procedure: 'The activated procedure started as task (1, 2, ... per queue) returns': "
        "a procedure of the queue runs, or there is nothing to return (the command is refused)"
    ),
    ("activation", "exit_procedure", "messages waiting, no reader"): (
        "docs/protocol.md, exit_procedure: 'The activated procedure started as task (1, 2, ... per queue) returns': "
        "a procedure of the queue runs, so the queue is never without a reader then"
    ),
}


def covered(folder: Path) -> dict[tuple[str, str, str], set[str]]:
    """The cells the recordings in FOLDER (tests/situations/recorder.py) set up, each with its scenarios."""
    by_scenario: dict[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            by_scenario.setdefault(row["scenario"], []).append((row["command"], row["events"]))
    out: dict[tuple[str, str, str], set[str]] = {}
    for scenario, steps in by_scenario.items():
        for cell in situations(steps):
            out.setdefault(cell, set()).add(scenario)
    return out


def table(cover: dict[tuple[str, str, str], set[str]]) -> str:
    """The matrix as text: per area, a row a command, a column a state, each cell's scenario count (- not a cell,
    x impossible, 0 left)."""
    lines = []
    every = set(cells())
    for area, states in STATES.items():
        lines.append(f"{area}: " + "; ".join(f"{n} {s.name}" for n, s in enumerate(states, 1)))
        for command in commands(area):
            marks = []
            for state in states:
                cell = (area, command, state.name)
                mark = "-" if cell not in every else "x" if cell in IMPOSSIBLE else str(len(cover.get(cell, ())))
                marks.append(f"{mark:>4}")
            lines.append(f"  {command:<26}" + "".join(marks))
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(covered(Path(sys.argv[1]))))
