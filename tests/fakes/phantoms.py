"""The reference, reporting what cannot be beside what it does: every report is held against the world
(sbtck/iut/log_check.py), so each of these fails or errs wherever it says so.

Each factory names one way; the answers are the reference's, changed as its docstring says.
"""

from __future__ import annotations

from collections.abc import Callable

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation
from sbtck.observations import Kind

Change = Callable[[list[contract.Event]], list[contract.Event]]


class _Hostile(ReferenceImplementation):
    def __init__(self, name: str, change: Change) -> None:
        super().__init__(name=name)
        self.change = change

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        response.events = self.change(response.events)
        return response


def _each(kind: str, change: Callable[[contract.Event], list[contract.Event]]) -> Change:
    return lambda events: [changed for e in events for changed in (change(e) if e.kind == kind else [e])]


def phantom_queue() -> ReferenceImplementation:
    """Every message arrives on a queue the topology does not have."""
    moved = _each(Kind.MESSAGE_ARRIVED, lambda e: [contract.Event(e.at_ms, e.kind, {**e.fields, "queue": "NoSuchQ"})])
    return _Hostile("phantom queue", moved)


def phantom_instance() -> ReferenceImplementation:
    """Beside every procedure it starts, one on an instance the topology does not have."""
    twin = _each(
        Kind.PROCEDURE_STARTED, lambda e: [e, contract.Event(e.at_ms, e.kind, {**e.fields, "instance": "sql99"})]
    )
    return _Hostile("phantom instance", twin)


def unknown_kind() -> ReferenceImplementation:
    """Every answer carries an event of a kind the protocol does not have."""
    return _Hostile("unknown kind", lambda events: [*events, contract.Event(events[-1].at_ms, "x")] if events else [])


def _reverse(events: list[contract.Event]) -> list[contract.Event]:
    if len({e.at_ms for e in events}) < 2:
        return events  # one instant: any order is its order
    # marked with a field no kind declares (never read), so that a test finds the answers it reversed in the log
    last = events[-1]
    return [contract.Event(last.at_ms, last.kind, {**last.fields, "hostile": "reversed"}), *events[-2::-1]]


def reversed_time() -> ReferenceImplementation:
    """Every answer's events, where they span instants, in reverse order."""
    return _Hostile("reversed time", _reverse)


def garbage_fields() -> ReferenceImplementation:
    """What made a queue monitor look is a word the protocol does not have."""
    garbled = _each(
        Kind.ACTIVATION_NECESSARY, lambda e: [contract.Event(e.at_ms, e.kind, {**e.fields, "trigger": "the moon"})]
    )
    return _Hostile("garbage", garbled)


def wrong_types() -> ReferenceImplementation:
    """A procedure's session id is a string."""
    typed = _each(Kind.PROCEDURE_STARTED, lambda e: [contract.Event(e.at_ms, e.kind, {**e.fields, "spid": "lots"})])
    return _Hostile("wrong types", typed)


def never_sent() -> ReferenceImplementation:
    """Beside every message it delivers, one of a number nobody sent."""
    extra = _each(
        Kind.MESSAGE_ARRIVED,
        lambda e: [e, contract.Event(e.at_ms, e.kind, {**e.fields, "message_sequence_number": 9999})],
    )
    return _Hostile("never sent", extra)
