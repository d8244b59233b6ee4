"""A trace: its hash, whatever order an implementation's JSON lists fields in, and the reference's events in it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sbtck.contract import Command, Handshake, Response
from sbtck.iut.reference import ReferenceImplementation, reference
from sbtck.workloads.generate import generate
from sbtck.workloads.trace import Trace, run


def _reversed(value: Any) -> Any:
    """The same value with every object's keys in the opposite order."""
    if isinstance(value, dict):
        return {k: _reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


def test_the_order_of_fields_does_not_change_the_hash() -> None:
    # an implementation over JSON lines writes its fields in any order it likes
    trace = run(generate(3), reference())
    assert Trace(trace.seed, _reversed(trace.steps)).digest() == trace.digest()


def test_the_hash_is_that_of_compact_json_with_sorted_keys() -> None:
    # what a maintainer recomputes from a trace in the Parquet output, with nothing but the json module
    for seed in range(20):
        trace = run(generate(seed), reference())
        written = json.dumps(trace.steps, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert trace.digest() == hashlib.sha256(written.encode()).hexdigest(), seed


def test_any_change_to_what_was_seen_changes_the_hash() -> None:
    trace = run(generate(3), reference())
    step = next(i for i, s in enumerate(trace.steps) if s["events"])
    later = json.loads(json.dumps(trace.steps))
    later[step]["events"][0]["at_ms"] += 1
    refused = json.loads(json.dumps(trace.steps))
    refused[step]["error"] = "refused"
    hashes = {trace.digest(), Trace(3, later).digest(), Trace(3, refused).digest()}
    assert len(hashes) == 3


def test_a_result_the_canonical_writer_refuses_still_has_a_hash_of_its_own() -> None:
    # an in-process implementation may answer with keys that are not strings, which msgspec will not sort;
    # such a trace hashes as it would after going through JSON
    steps: list[dict[str, Any]] = [
        {"kind": "query_view", "error": None, "result": {"rows": [{1: "x", 0: "y"}]}, "events": []}
    ]
    other: list[dict[str, Any]] = [
        {"kind": "query_view", "error": None, "result": {"rows": [{2: "x", 0: "y"}]}, "events": []}
    ]
    first = Trace(0, steps).digest()
    assert first == Trace(0, json.loads(json.dumps(steps))).digest()
    assert first != Trace(0, other).digest()


class _Wrapped:
    """The reference behind nothing but the contract: its events come back as ``Event`` objects."""

    def __init__(self) -> None:
        self.inner = reference()

    def handshake(self) -> Handshake:
        return self.inner.handshake()

    def execute(self, command: Command) -> Response:
        return self.inner.execute(command)

    def close(self) -> None:
        self.inner.close()


def test_the_reference_in_process_gives_the_trace_its_responses_give() -> None:
    # the stage takes the reference's events as JSON objects straight from its log; nothing may differ
    refused = 0
    for seed in range(60):
        world = generate(seed)
        # the generator writes no command the documents leave undefined; a COMMIT outside a transaction is refused
        world.script.append({"kind": "commit", "at_ms": world.script[-1]["at_ms"], "session": "Nobody"})
        direct, wrapped = run(world, reference()), run(world, _Wrapped())
        assert direct.steps == wrapped.steps, seed
        assert direct.digest() == wrapped.digest(), seed
        refused += sum(1 for s in direct.steps if s["error"])
    assert refused, "no world refused a command: the refusals' events were not compared"


class _Renames(ReferenceImplementation):
    """A subclass that changes what ``execute`` answers: the trace must show its answers, not the engine's."""

    def execute(self, command: Command) -> Response:
        response = super().execute(command)
        for event in response.events:
            event.fields["seen_by"] = "subclass"
        return response


def test_a_subclass_that_changes_execute_is_run_through_it() -> None:
    trace = run(generate(3), _Renames())
    events = trace.events()
    assert events and all(e["seen_by"] == "subclass" for e in events)
