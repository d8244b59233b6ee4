"""When what an implementation shows agrees with what the rules allow: one answer for the suite and the stage.

The suite compares a feature's table with an implementation's events (``sbtck/steps/observe_steps.py``,
``sbtck/steps/cells.py``); the randomized stage compares an implementation's trace with the reference's
(``sbtck/workloads/differential.py``). The latitude the contract gives is written here once, so that the two
cannot drift apart:

- An implementation is asked only for the kinds its capabilities report, never for an echo of the kit's own
  faults, and for what only a decision trace shows (its kinds, and the fields ``rule`` and ``step`` of others)
  only when it declares ``decision_trace`` (``asked``, ``asked_field``).
- A network address compares without case: the documents give host names none (``compared``).
- A field an event does not carry is null, as the contract says, and never false: a table's cell reads it NULL,
  and two traces agree on it whatever the other side carries (``agree``).
- The events of one instant compare as a set: the documents order instants, never the events of one
  (``arrangement``).
- A list the documents give no order compares as a set; which member names a group of identical routes is open
  (RTC-0), so the candidates a ``route_chosen`` names compare by their number (``field_agrees``).
- Every field compares by its declared class (``observations.Record``, ``views.COLUMN_CLASSES``): free text
  never (``compares``), a relative identity by what it refers to (``relative_name``), reasoning only with a
  decision trace, and there coinciding triggers either way (``reconciled``).
- A report whose moment the documents do not state is not held against an implementation: neither its
  presence nor its moment (``held``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sbtck.observations import (
    DECISION_FIELDS,
    ECHOES,
    EXACT,
    FREE_TEXT,
    ONCE_AN_INSTANT,
    RECORDS,
    RELATIVE,
    TRACE,
    Kind,
    Trigger,
    reported_by,
)
from sbtck.views import REFERS_TO, column_class

# network addresses, in events and in views' rows
CASE_FREE = frozenset({"address", "mirror_address"})
BY_NUMBER = frozenset((kind, f.name) for kind, r in RECORDS.items() for f in r.fields if f.by_number)
_ECHOES = frozenset(ECHOES)
_UNCOMPARED = frozenset((kind, f.name) for kind, r in RECORDS.items() for f in r.fields if f.compared == FREE_TEXT)
_HELD = frozenset(kind for kind, r in RECORDS.items() if r.compared_always)


def asked(kind: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Is an implementation with these capabilities asked for events of this kind?"""
    return kind not in _ECHOES and reported_by(kind, capabilities)


def traced(capabilities: frozenset[str] | set[str]) -> bool:
    """Does it report its reasoning: the decision-trace kinds, and the fields ``rule`` and ``step``?"""
    return TRACE in capabilities


def asked_field(name: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Is it asked for this field of the events it reports? The reasoning fields only with a decision trace."""
    return name not in DECISION_FIELDS or traced(capabilities)


def held(kind: str) -> bool:
    """Are an event's presence and moment compared? An effect's always; a report's only where the contract
    states when it is reported (docs/protocol.md): a kind the kit does not declare, never."""
    return kind in _HELD


def field_class(kind: str | None, name: str) -> str:
    """The comparison class of field NAME of KIND (a view's column when KIND is None)."""
    r = RECORDS.get(kind) if kind is not None else None
    if r is None:
        return column_class(name)
    f = r.field(name)
    return f.compared if f is not None else EXACT


def compares(kind: str | None, name: str) -> bool:
    """Is field NAME of KIND compared at all? Free text never is."""
    if kind is None:
        return column_class(name) != FREE_TEXT
    return (kind, name) not in _UNCOMPARED


def relative_name(name: str, value: Any, where: dict[str, Any], names: dict[object, str]) -> Any:
    """A relative identity (a spid, an object id) as what it refers to, by the columns of WHERE that name it.

    NAMES, one side's own, remembers what each value first referred to: a value meaning two things on one side
    keeps its first name, and so differs where the other side gives them two values.
    """
    if value is None or name not in REFERS_TO:
        return value
    key = (name, str(where.get("instance")), str(value))
    found = names.get(key)
    if found is None:
        found = names[key] = f"{name} of " + "/".join(str(where.get(k)) for k in REFERS_TO[name])
    return found


def row_as_compared(row: dict[str, Any], columns: frozenset[str], names: dict[object, str]) -> dict[str, Any]:
    """A view's row as it is compared: its declared COLUMNS, free text left out, relative ids by what they name."""
    out = {}
    for k, v in row.items():
        if k not in columns or not compares(None, k):
            continue
        out[k] = relative_name(k, v, row, names) if column_class(k) == RELATIVE else canonical(compared(k, v))
    return out


# ACT-06 and ACT-07 at one instant: an arrival on a queue and a timer notification of its instance
_COINCIDING = frozenset({("ACT-06", Trigger.ARRIVAL), ("ACT-07", Trigger.TIMER)})
_COINCIDING_RULES = frozenset(rule for rule, _ in _COINCIDING)
_COINCIDING_TRIGGERS = frozenset(trigger for _, trigger in _COINCIDING)


def reconciled(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GOT with the reasoning of WANT where both name a rule that applies at that instant.

    When a message arrives on a queue in the instant of its instance's timer notification, activation is
    necessary by ACT-06 and by ACT-07 alike; which trigger an implementation names decides nothing while the
    procedure starts at the same instant (compared as its own event), so either rule and trigger is accepted.
    So is, for the same rule, any trigger that happened to that queue in that instant (a message arrived, a
    RECEIVE executed, a transaction rolled back, a procedure exited, the queue was altered, the timer notified):
    ACT-05 names no order among events of one instant, and a check is one check whichever of them it names.
    """
    if not any(e["kind"] == _NECESSARY for e in got):
        return got
    ticks = {(e.get("instance"), e.get("at_ms")) for e in want if e["kind"] == Kind.TIMER_NOTIFICATION}
    arrivals = {_at_queue(e) for e in want if e["kind"] == Kind.MESSAGE_ARRIVED}
    happened = _triggers(want, ticks)
    theirs: dict[tuple[object, ...], list[tuple[object, object]]] = {}
    for e in want:
        if e["kind"] == _NECESSARY:
            theirs.setdefault(_at_queue(e), []).append((e.get("rule"), e.get("trigger")))
    out = []
    for e in got:
        place = _at_queue(e)
        named = (e.get("rule"), e.get("trigger"))
        others = theirs.get(place, []) if e["kind"] == _NECESSARY else []
        if others and named not in others:  # else the reference named it so too: nothing to reconcile
            coinciding = (
                [o for o in others if o[0] in _COINCIDING_RULES]
                if (
                    place in arrivals
                    and (e.get("instance"), e.get("at_ms")) in ticks
                    and named[0] in _COINCIDING_RULES
                    and named[1] in _COINCIDING_TRIGGERS
                )
                else []
            )
            same_rule = [o for o in others if o[0] == named[0]] if named[1] in happened.get(place, ()) else []
            chosen = next(iter(coinciding or same_rule), None)
            if chosen is not None:
                e = {**e, "rule": chosen[0], "trigger": chosen[1]}
        out.append(e)
    return out


def once_an_instant(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EVENTS with each report of ONCE_AN_INSTANT kept once where the same one repeats at its queue and instant,
    whichever trigger each names (``reconciled`` first, so that an implementation's look naming another trigger of
    the instant reads as the report the reference kept)."""
    if not any(e["kind"] in ONCE_AN_INSTANT for e in events):
        return events
    again = repeats_in_an_instant(events)
    return [e for i, e in enumerate(events) if i not in again]


def repeats_in_an_instant(events: Sequence[dict[str, Any]]) -> set[int]:
    """The positions of EVENTS that repeat an earlier report of ONCE_AN_INSTANT at the same instant, but for the
    trigger that made the monitor look (any trigger of the instant is accepted: ``reconciled``)."""
    seen: set[str] = set()
    again = set()
    for i, e in enumerate(events):
        if e["kind"] in ONCE_AN_INSTANT:
            key = json.dumps({k: v for k, v in e.items() if k != "trigger"}, sort_keys=True, default=str)
            if key in seen:
                again.add(i)
            seen.add(key)
    return again


def _triggers(want: list[dict[str, Any]], ticks: set[tuple[object, object]]) -> dict[tuple[object, ...], set[str]]:
    """The triggers of ACT-05 that happened to each queue at each instant, by what the reference's events show."""
    rolled_back = {e.get("at_ms") for e in want if e["kind"] == Kind.TRANSACTION_ROLLED_BACK}
    happened: dict[tuple[object, ...], set[str]] = {}
    for e in want:
        if e.get("queue") is None:
            continue
        place = _at_queue(e)
        found = happened.setdefault(place, set())
        kind = e["kind"]
        if kind == _NECESSARY:
            found.add(str(e.get("trigger")))
        elif kind == Kind.MESSAGE_ARRIVED:
            found.add(Trigger.ARRIVAL)
        elif kind in (Kind.ROWS_RETURNED, Kind.EMPTY_RESULT, Kind.READER_WAITING):
            found.add(Trigger.RECEIVE)
        elif kind == Kind.PROCEDURE_EXITED:
            found.add(Trigger.ALL_EXITED)
        elif kind == Kind.QUEUE_ALTERED:
            found.add(Trigger.ALTER)
        if e.get("at_ms") in rolled_back:
            found.add(Trigger.ROLLBACK)
        if (e.get("instance"), e.get("at_ms")) in ticks:
            found.add(Trigger.TIMER)
    return happened


_NECESSARY = Kind.ACTIVATION_NECESSARY


def _at_queue(e: dict[str, Any]) -> tuple[object, ...]:
    return (e.get("instance"), e.get("database"), e.get("queue"), e.get("at_ms"))


def without_reasoning(event: dict[str, Any]) -> dict[str, Any]:
    """EVENT as an implementation without a decision trace is asked for it."""
    return {k: v for k, v in event.items() if k not in DECISION_FIELDS}


def compared(name: str, found: Any) -> Any:
    """A field's value as it is compared: an address in upper case."""
    if name in CASE_FREE and isinstance(found, str):
        return found.upper()
    return found


def canonical(found: Any) -> Any:
    if isinstance(found, list):
        items = [canonical(v) for v in found]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    if isinstance(found, dict):
        return {k: canonical(v) for k, v in found.items()}
    return found


def compared_form(kind: str, name: str, value: Any) -> Any:
    """A field's value in the form two values of it are compared in: a list compared by its number, that number;
    else a list as a set, an address without case."""
    if (kind, name) in BY_NUMBER and isinstance(value, list):
        return len(value)
    return canonical(compared(name, value))


def field_agrees(kind: str, name: str, a: Any, b: Any) -> bool:
    """Two values of one field agree: free text always, else in their compared form."""
    if a == b:  # equal values have equal canonical forms: most fields of most events, at no sorting's cost
        return True
    if (kind, name) in _UNCOMPARED:
        return True
    return bool(compared_form(kind, name, a) == compared_form(kind, name, b))


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two events agree on kind and every field both carry: a field one of them lacks is unknown."""
    if a == b:  # every field carried by both and equal: an implementation's usual answer
        return True
    return a["kind"] == b["kind"] and all(field_agrees(a["kind"], k, a[k], b[k]) for k in a.keys() & b.keys())


Got = TypeVar("Got")
Want = TypeVar("Want")


def arrangement(got: Sequence[Got], want: Sequence[Want], fits: Callable[[Want, Got], bool]) -> list[int] | None:
    """Distinct members of GOT, one for each of WANT in its order, each fitting it; None if there are none.

    What comparing the events of one instant as a set comes to: instants are small, so it backtracks.
    """
    fitting = [[i for i, g in enumerate(got) if fits(w, g)] for w in want]
    chosen: list[int] = []

    def place(k: int) -> bool:
        if k == len(want):
            return True
        for i in fitting[k]:
            if i not in chosen:
                chosen.append(i)
                if place(k + 1):
                    return True
                chosen.pop()
        return False

    return chosen if place(0) else None
