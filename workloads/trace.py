"""Running a world on an implementation: the trace, and its hash."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sbtck.contract import command_from_json
from sbtck.iut.implementation import Implementation
from sbtck.iut.reference import ReferenceImplementation
from sbtck.workloads.generate import StageWorld

# The bytes a trace's hash is taken of: compact JSON with every object's keys sorted, so that the hash
# says what the implementation did, not the order its JSON happened to list fields in. msgspec writes
# them four times faster than the json module did, which was a quarter of checking a world.
_CANONICAL = msgspec.json.Encoder(order="sorted", enc_hook=str)
# what a trace msgspec cannot write takes instead (an in-process implementation may return dicts with
# keys that are not strings); the same trace always takes the same way, so its hash is still its own
_FALLBACK = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Trace:
    seed: int
    # per command: its kind, whether it was refused, and the events it produced
    steps: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        return [event for step in self.steps for event in step["events"]]

    def digest(self) -> str:
        try:
            canonical = _CANONICAL.encode(self.steps)
        except (TypeError, ValueError, OverflowError):
            canonical = _FALLBACK.encode(self.steps).encode()
        return hashlib.sha256(canonical).hexdigest()


def execute(op: dict[str, Any], implementation: Implementation) -> dict[str, Any]:
    """One command of a world on the implementation: the step of its trace."""
    # the reference's own JSON path, unless a subclass answers otherwise (the kit's tests' brokers rewrite answers)
    if isinstance(implementation, ReferenceImplementation) and type(implementation).execute is _REFERENCE_EXECUTE:
        error, result, events = implementation.execute_json(op)
    else:
        response = implementation.execute(command_from_json(op))
        error, result, events = response.error, response.result, [e.to_json() for e in response.events]
    return {
        "kind": op["kind"],
        "error": error,
        # a snapshot, whatever the implementation does with the object it returned
        "result": _snapshot(result),
        "events": events,
    }


# a tuple built once: ``str | int | ...`` written in the call built a union of types each time, in the compiled build
# too, and most of what a result holds is these
_SCALARS = (str, int, float, bool, type(None))


_REFERENCE_EXECUTE = ReferenceImplementation.execute


def _snapshot(value: Any) -> Any:
    """A copy of a JSON-like value: what ``copy.deepcopy`` gives, without its memo (results hold no cycles)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    return copy.deepcopy(value)


def run(world: StageWorld, implementation: Implementation) -> Trace:
    return Trace(world.seed, [execute(op, implementation) for op in world.script])
