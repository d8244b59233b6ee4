"""What must hold in every trace, whatever the world: checked without a second implementation.

Each violation names the rule it breaks: a catalogue id, or INV-* for the
kit's own invariants (no message lost or duplicated, order per conversation).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sbtck.observations import Kind
from sbtck.workloads.generate import TIMER_MS, WAITING_VIEWS, StageWorld
from sbtck.workloads.trace import Trace

# The kinds ``step`` looks at, as the plain strings events carry: naming a member of the enum costs a lookup
# of the enum's each time, and ``step`` compares every event of a world with several of them.
STARTED, EXITED = Kind.PROCEDURE_STARTED, Kind.PROCEDURE_EXITED
SENT, ARRIVED = Kind.MESSAGE_SENT, Kind.MESSAGE_ARRIVED
RETURNED, NOTIFICATION = Kind.ROWS_RETURNED, Kind.TIMER_NOTIFICATION
COMMITTED, ROLLED_BACK = Kind.TRANSACTION_COMMITTED, Kind.TRANSACTION_ROLLED_BACK
GONE = frozenset(
    k
    for k in (
        Kind.MESSAGE_DROPPED,
        Kind.DISPATCHER_DELETED,
        Kind.FORWARDED_MESSAGE_DELETED,
        Kind.MESSAGE_LOST_IN_TRANSIT,
    )
)
# most events of a long world (routing retried every few seconds) are none of them
WATCHED = frozenset({STARTED, EXITED, SENT, ARRIVED, *GONE, RETURNED, COMMITTED, ROLLED_BACK, NOTIFICATION})
Msg = tuple[str, bool, int]


@dataclass(frozen=True)
class Violation:
    rule: str
    at_step: int
    detail: str


def _msg(fields: dict[str, Any]) -> Msg:
    return (str(fields.get("dialog")), bool(fields.get("from_target")), int(fields.get("message_sequence_number", -1)))


def _both(fields: dict[str, Any]) -> tuple[Msg, Msg]:
    dialog, sequence = str(fields.get("dialog")), int(fields.get("message_sequence_number", -1))
    return (dialog, False, sequence), (dialog, True, sequence)


def _max_readers(world: StageWorld) -> dict[tuple[str, str, str], int]:
    return {
        (i["name"], d["name"], q["name"]): int(q["activation"]["max_queue_readers"])
        for i in world.topology["instances"]
        for d in i["databases"]
        for q in d["queues"]
    }


class Invariants:
    """The invariants, fed one step at a time: a violation is known at the step that shows it.

    ``step`` returns what that step breaks; ``end`` what the whole trace
    breaks (messages lost or duplicated, order per conversation), once the
    world is over.
    """

    def __init__(self, world: StageWorld) -> None:
        self.world = world
        self.start_ms = world.start_ms  # read for every timer notification, the most frequent event
        self.limit = _max_readers(world)
        self.running: Counter[tuple[str, str, str]] = Counter()
        self.sent: Counter[Msg] = Counter()
        self.arrived: list[Msg] = []
        self.gone: Counter[Msg] = Counter()
        self.in_transaction: set[str] = set()
        self.pending: dict[str, list[tuple[Msg, tuple[str, str, str, str]]]] = {}
        self.committed: list[Msg] = []
        self.holders: dict[tuple[str, str, str, str], str] = {}
        self.notifications: dict[str, int] = {}
        self.waiting: Counter[Msg] = Counter()
        # the messages the kit itself made the network lose: whether the loss is reported is the
        # implementation's choice (an echo of the kit's own fault), so each may be missing
        self.may_be_lost: set[Msg] = set()
        self.initiators: dict[str, str] = {}  # each dialog's initiating service
        # events about a message of a number both ends sent, that say neither which end nor where it arrived
        self.either: list[tuple[Msg, Msg]] = []

    def step(self, index: int, op: dict[str, Any], step: dict[str, Any]) -> list[Violation]:
        found: list[Violation] = []
        limit, running = self.limit, self.running
        if op["kind"] == "alter_queue" and not step["error"] and op.get("max_queue_readers") is not None:
            q = op["queue"]
            limit[(q["instance"], q["database"], q["queue"])] = int(op["max_queue_readers"])
        if op["kind"] == "begin_dialog" and not step["error"]:
            self.initiators[str(op["dialog"])] = str(op["from_service"])
        if op["kind"] == "lose_in_transit" and not step["error"]:
            self.may_be_lost.add((str(op["dialog"]), bool(op.get("from_target")), int(op["sequence"])))
        if op["kind"] == "begin_transaction" and not step["error"]:
            self.in_transaction.add(op["session"])
        if op["kind"] == "query_view" and op["view"] in WAITING_VIEWS:
            self.waiting.update(_msg(row) for row in step["result"].get("rows", []))
        for e in step["events"]:
            kind = e["kind"]
            if kind not in WATCHED:
                continue
            if kind == NOTIFICATION:  # the most frequent of them: a world notifies every period of the timer
                instance = str(e.get("instance"))
                number = self.notifications.get(instance, 0) + 1
                self.notifications[instance] = number
                start = self.start_ms
                if e.get("number") != number or e["at_ms"] != start + TIMER_MS * number:
                    found.append(
                        Violation(
                            "PER-0",
                            index,
                            f"notification {e.get('number')} of {instance} at "
                            f"{e['at_ms'] - start} ms; expected number {number} at {TIMER_MS * number}",
                        )
                    )
                continue
            key = (str(e.get("instance")), str(e.get("database")), str(e.get("queue")))
            session = str(e.get("session", ""))
            if kind == STARTED:
                if running[key] >= limit.get(key, 0):
                    found.append(
                        Violation(
                            "ACT-10",
                            index,
                            f"procedure started on {key} with {running[key]} "
                            f"running and MAX_QUEUE_READERS {limit.get(key, 0)}",
                        )
                    )
                running[key] += 1
            elif kind == EXITED:
                running[key] -= 1
            elif kind == SENT:
                # an implementation need not say which end sent: the SEND command does
                sent = e if "from_target" in e or op["kind"] != "send" else {**e, "from_target": op.get("from_target")}
                self.sent[_msg(sent)] += 1
            elif kind == ARRIVED:
                which = self._which(e)
                if which is None:
                    self.either.append(_both(e))
                else:
                    self.arrived.append(which)
            elif kind in GONE:
                which = self._which(e)
                if which is None:
                    self.either.append(_both(e))
                else:
                    self.gone[which] += 1
            elif kind == RETURNED and e.get("statement") == "RECEIVE":
                for row in e.get("rows", []):
                    msg = (str(row["dialog"]), False, int(row["message_sequence_number"]))
                    lock = (*key, str(row["conversation_group"]))
                    if self.holders.get(lock, session) != session:
                        found.append(
                            Violation("ACT-09", index, f"{session} read group {lock} held by {self.holders[lock]}")
                        )
                    if "#" in session or session in self.in_transaction:
                        self.holders[lock] = session
                        self.pending.setdefault(session, []).append((msg, lock))
                    else:
                        self.committed.append(msg)
            elif kind in (COMMITTED, ROLLED_BACK):
                for msg, lock in self.pending.pop(session, []):
                    self.holders.pop(lock, None)
                    if kind == COMMITTED:
                        self.committed.append(msg)
                self.in_transaction.discard(session)
        return found

    def _which(self, e: dict[str, Any]) -> Msg | None:
        """The message an event names; without from_target (an unreported field is unknown, never false), the one of
        the two ends' messages of that number that was sent, when only one was, or the end whose service it
        arrived at; None when nothing tells (``either``)."""
        if "from_target" in e:
            return _msg(e)
        dialog, sequence = str(e.get("dialog")), int(e.get("message_sequence_number", -1))
        sent = [(dialog, end, sequence) for end in (False, True) if (dialog, end, sequence) in self.sent]
        if len(sent) == 1:
            return sent[0]
        service, initiator = e.get("service"), self.initiators.get(dialog)
        if service is not None and initiator is not None:
            return (dialog, service == initiator, sequence)  # at the initiator's service: the target's reply
        return None

    def end(self, steps: int) -> list[Violation]:
        found: list[Violation] = []
        arrived = self.arrived
        duplicates = [m for m, n in Counter(arrived).items() if n > 1]
        if duplicates:
            found.append(Violation("INV-messages", steps, f"arrived more than once: {duplicates[:5]}"))
        twice = sorted(m for m, n in self.sent.items() if n > 1)
        if twice:
            found.append(Violation("INV-messages", steps, f"sent more than once: {twice[:5]}"))
        # A drop, a deletion or a loss ends one copy, not the message: a broker sends again what has not arrived
        # (docs/steps.md), so a message dropped and then delivered is accounted for, as is one still waiting.
        accounted = set(arrived) | self.gone.keys() | self.waiting.keys()
        absent = self.sent.keys() - accounted - self.may_be_lost
        for pair in self.either:  # an event that did not say which end's message it was accounts for either
            absent -= set(pair[: 1 if pair[0] in absent else 2])
        missing = sorted(absent)[:5]
        extra = sorted(accounted - self.sent.keys())[:5]
        if missing or extra:
            found.append(Violation("INV-messages", steps, f"lost {missing}, unexplained {extra}"))
        orders: dict[str, list[int]] = {}
        for dialog, from_target, sequence in arrived:
            if not from_target:
                orders.setdefault(dialog, []).append(sequence)
        for dialog, order in orders.items():
            if order != sorted(order):
                found.append(Violation("INV-order", steps, f"{dialog} arrived as {order}"))
        read = [m for m, n in Counter(self.committed).items() if n > 1]
        if read:
            found.append(Violation("INV-messages", steps, f"received and committed twice: {read[:5]}"))
        return found


def check(world: StageWorld, trace: Trace) -> list[Violation]:
    """Every invariant over a whole trace."""
    invariants = Invariants(world)
    found: list[Violation] = []
    for index, (op, step) in enumerate(zip(world.script, trace.steps, strict=True)):
        found += invariants.step(index, op, step)
    return found + invariants.end(len(trace.steps))
