"""Every report held against the world it is about: what an implementation says must be able to be.

A scenario's ``Then`` steps read the rows they name; everything else an implementation reports was once
believed unread (issue 44): a queue that does not exist, a kind the protocol does not have, a field of the
wrong type, events out of time order, a message that arrives though it was never sent. ``LogCheck`` is fed
each command and its answer, in the trace form the stage keeps (``op`` as the command's JSON, the events as
JSON objects), and answers what cannot be:

- a kind the protocol does not declare, or a field of a type or value the contract does not declare for it
  (``docs/protocol.md``): the implementation breaks the protocol - a ``ProtocolError``, the scenario an error;
- an entity the world does not hold at that instant (an instance, database, queue or service not in the
  topology; a dialog no command began; a session no command named and no activated task of a queue holds),
  events of one answer out of time order, a message that arrives twice or was never sent: the implementation
  reported what cannot have happened - a ``ReportImpossible``, the scenario a failure.

The suite runs it on every answer of every scenario (``sbtck/steps/world.py``); the stage on every world of an
implementation it holds against the reference (``sbtck/workloads/stage.py``), so the two cannot drift. Each
finding names the event (its index in the answer, its kind and instant) and the invariant it breaks.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sbtck import catalogue
from sbtck.contract import Event
from sbtck.errors import ProtocolError, ReportImpossible
from sbtck.iut.answers import json_type
from sbtck.observations import KINDS, RULE_FIELDS, Kind, record, values_of
from sbtck.topology import Topology, decode

_KINDS = frozenset(KINDS)
_RULE_IDS = frozenset(catalogue.load().rules)
# the commands whose ``session`` names a user's session, as the scenario or world named it
_SESSION_COMMANDS = frozenset({"receive", "get_conversation_group", "begin_transaction", "commit", "rollback"})
# msdb holds the instance's routes; an event about one may name it as its database
MSDB = "msdb"
# a message, as the invariants name it: dialog, whether it is the target's (a reply), its sequence number
Message = tuple[str, bool | None, int]


def declared_type(kind: str, name: str) -> str | None:
    """The JSON type the event's record declares for a field of KIND (``string or null``), or None for a field the
    record does not declare (the implementation's own, never read)."""
    found = record(kind)
    declared = found.field(name) if found is not None else None
    return None if declared is None else declared.type.replace("list", "array")


def declared_values(kind: str, name: str) -> frozenset[str] | None:
    """The values the record allows a field of KIND, or None where any value of its type is allowed."""
    if name in RULE_FIELDS:
        return _RULE_IDS
    values = values_of(kind, name)
    return None if values is None else frozenset(values)


class LogCheck:
    """The world as the commands made it, and every answer held against it (see the module's description)."""

    def __init__(self) -> None:
        self.instances: set[str] = set()
        self.databases: set[tuple[str, str]] = set()
        self.queues: set[tuple[str, str, str]] = set()
        self.queue_names: set[str] = set()
        self.services: set[tuple[str, str, str]] = set()
        self.dialogs: set[str] = set()
        self.sessions: set[str] = set()
        self.sent: set[Message] = set()
        self.arrived: set[Message] = set()

    # ------------------------------------------------------------ the world

    def _declare(self, topology: Topology) -> None:
        for instance in topology.instances:
            name = instance.name
            self.instances.add(name)
            for database in instance.databases:
                db = database.name
                self.databases.add((name, db))
                for queue in database.queues:
                    self.queues.add((name, db, queue.name))
                    self.queue_names.add(queue.name)
                for service in database.services:
                    self.services.add((name, db, service.name))

    def _command(self, op: dict[str, Any]) -> None:
        kind = op.get("kind")
        if kind == "start":
            self._declare(decode(op["topology"], Topology, "command 'start': topology"))
        elif kind == "begin_dialog":
            self.dialogs.add(str(op.get("dialog")))
        if kind in _SESSION_COMMANDS and op.get("session") is not None:
            self.sessions.add(str(op["session"]))

    # ------------------------------------------------------------ an answer

    def answer(self, op: dict[str, Any], events: Sequence[Event | dict[str, Any]]) -> None:
        """Hold the answer to OP (its events as the contract's Events, or as JSON objects in the stage's traces)
        against the world; raise what cannot be."""
        self._command(op)
        last = None
        for i, found in enumerate(events):
            # read in place: a flood of events must cost no copy of each (SBTCK_MAX_EVENTS_PER_ANSWER)
            event = _Fields(found) if isinstance(found, Event) else found
            where = f"{op.get('kind')} at {op.get('at_ms')}: the event `$.events[{i}]`"
            kind = event.get("kind")
            if kind not in _KINDS:
                raise ProtocolError(
                    f"{where} is of kind {reprlib.repr(kind)}, which the protocol does not declare "
                    "(docs/protocol.md lists every kind) (invariant: declared kinds)"
                )
            where = f"{where} ({kind} at {event.get('at_ms')})"
            self._fields(where, kind, event)
            at = event.get("at_ms")
            if last is not None and isinstance(at, int) and at < last:
                raise ReportImpossible(
                    f"{where} comes after an event at {last}: an answer's events are in the order they happened "
                    "(invariant: time order)"
                )
            last = at if isinstance(at, int) else last
            self._entities(where, kind, event)
            self._messages(where, op, kind, event)

    def _fields(self, where: str, kind: str, event: Mapping[str, Any]) -> None:
        for name, value in event.items():
            if name in ("at_ms", "kind") or value is None:
                continue
            declared = declared_type(kind, name)
            if declared is None:
                continue  # a field the kind does not declare is the implementation's own, and never read
            found = json_type(value)
            # a number may be whole: JSON has one number type, and an integer is one of its values
            if found not in declared.split(" or ") and not (found == "integer" and "number" in declared):
                raise ProtocolError(
                    f"{where} has {name!r} = {reprlib.repr(value)} ({found}); the contract declares "
                    f"{declared} (invariant: declared types)"
                )
            allowed = declared_values(kind, name)
            members = value if isinstance(value, list) else [value]  # a list of a closed set's members
            if allowed is not None and not all(isinstance(v, str) and v in allowed for v in members):
                raise ProtocolError(
                    f"{where} has {name!r} = {reprlib.repr(value)}, not one of the values the contract declares "
                    f"for it (docs/protocol.md) (invariant: declared values)"
                )

    def _entities(self, where: str, kind: str, event: Mapping[str, Any]) -> None:
        instance = event.get("instance")
        for name in ("instance", "to_instance"):
            value = event.get(name)
            if value is not None and value not in self.instances:
                self._phantom(where, name, value, "instance of the topology")
        database = event.get("database")
        if instance is not None and database not in (None, MSDB) and (instance, database) not in self.databases:
            self._phantom(where, "database", database, f"database of {instance}")
        queue = event.get("queue")
        if None not in (instance, database, queue) and (instance, database, queue) not in self.queues:
            self._phantom(where, "queue", queue, f"queue of {instance}.{database}")
        service = event.get("service")
        in_database = service is not None and database is not None
        if kind == Kind.MESSAGE_ARRIVED and in_database and (instance, database, service) not in self.services:
            self._phantom(where, "service", service, f"service of {instance}.{database}")
        dialogs = [event.get("dialog")] + [row.get("dialog") for row in _rows(event)]
        for dialog in dialogs:
            if dialog is not None and dialog not in self.dialogs:
                self._phantom(where, "dialog", dialog, "dialog a command began")
        session = event.get("session")
        if session is not None and session not in self.sessions:
            owner, mark, number = str(session).rpartition("#")
            if not (mark and owner in self.queue_names and number.isdigit()):
                self._phantom(where, "session", session, "session a command named or activated task (QUEUE#N)")

    @staticmethod
    def _phantom(where: str, name: str, value: object, what: str) -> None:
        raise ReportImpossible(
            f"{where} names {name} {reprlib.repr(value)}, which is no {what} at that instant (invariant: entities)"
        )

    def _messages(self, where: str, op: dict[str, Any], kind: str, event: Mapping[str, Any]) -> None:
        if kind not in (Kind.MESSAGE_SENT, Kind.MESSAGE_ARRIVED):
            return
        dialog, sequence = event.get("dialog"), event.get("message_sequence_number")
        if dialog is None or not isinstance(sequence, int):
            return
        from_target = event.get("from_target")
        if from_target is None and kind == Kind.MESSAGE_SENT and op.get("kind") == "send":
            from_target = bool(op.get("from_target"))
        message: Message = (str(dialog), from_target if isinstance(from_target, bool) else None, sequence)
        if kind == Kind.MESSAGE_SENT:
            if message in self.sent and message[1] is not None:
                raise ReportImpossible(f"{where} sends {message} a second time (invariant: a message is sent once)")
            self.sent.add(message)
            return
        ends = [message] if message[1] is not None else [(message[0], end, sequence) for end in (False, True)]
        if not any(m in self.sent or (m[0], None, m[2]) in self.sent for m in ends):
            raise ReportImpossible(
                f"{where} delivers {message}, which no message_sent reported (invariant: nothing arrives unsent)"
            )
        if message[1] is not None and message in self.arrived:
            raise ReportImpossible(
                f"{where} delivers {message} a second time (invariant: a message arrives at most once)"
            )
        self.arrived.add(message)


class _Fields(Mapping[str, Any]):
    """An Event read as its JSON object (at_ms, kind and its fields), without building one."""

    __slots__ = ("event",)

    def __init__(self, event: Event) -> None:
        self.event = event

    def __getitem__(self, name: str) -> Any:
        if name == "at_ms":
            return self.event.at_ms
        if name == "kind":
            return self.event.kind
        return self.event.fields[name]

    def __iter__(self) -> Iterator[str]:
        yield "at_ms"
        yield "kind"
        yield from self.event.fields

    def __len__(self) -> int:
        return 2 + len(self.event.fields)


def _rows(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = event.get("rows")
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []
