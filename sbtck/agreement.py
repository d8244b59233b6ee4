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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sbtck.observations import DECISION_FIELDS, ECHOES, TRACE, Kind, reported_by

# network addresses, in events and in views' rows
CASE_FREE = frozenset({"address", "mirror_address"})
BY_NUMBER = frozenset({(Kind.ROUTE_CHOSEN, "candidates")})
_ECHOES = frozenset(ECHOES)


def asked(kind: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Is an implementation with these capabilities asked for events of this kind?"""
    return kind not in _ECHOES and reported_by(kind, capabilities)


def traced(capabilities: frozenset[str] | set[str]) -> bool:
    """Does it report its reasoning: the decision-trace kinds, and the fields ``rule`` and ``step``?"""
    return TRACE in capabilities


def asked_field(name: str, capabilities: frozenset[str] | set[str]) -> bool:
    """Is it asked for this field of the events it reports? The reasoning fields only with a decision trace."""
    return name not in DECISION_FIELDS or traced(capabilities)


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


def field_agrees(kind: str, name: str, a: Any, b: Any) -> bool:
    """Two values of one field agree: equal once lists are taken as sets and addresses without case."""
    if a == b:  # equal values have equal canonical forms: most fields of most events, at no sorting's cost
        return True
    if (kind, name) in BY_NUMBER and isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b)
    return bool(canonical(compared(name, a)) == canonical(compared(name, b)))


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
