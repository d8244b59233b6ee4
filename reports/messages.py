"""Cucumber Messages (NDJSON) from results.json: what today's Cucumber HTML formatter and reporting services read.

One JSON envelope a line, in the order Cucumber writes them: ``meta``; for
each feature file its ``source``, ``gherkinDocument`` and ``pickle``s (made
by Cucumber's own Gherkin parser, gherkin-official, so the ids and AST
references are a Cucumber implementation's); a ``stepDefinition`` for each
of the kit's phrases used (a step of a project's own is its own definition);
then ``testRunStarted``, for each scenario ``testCase``, ``testCaseStarted``,
each step's ``testStepStarted`` and ``testStepFinished``, ``testCaseFinished``,
and ``testRunFinished``. A feature file the report cannot read again gets
pickles made from results.json alone.

The statuses map as in cucumber.json (sbtck/reports/cucumber.py): a failure
outside the steps, and an unexpected pass, are an after hook ``sbtck`` that
failed; an outline's examples are a pickle each (the example's row).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import platform
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sbtck import __version__
from sbtck.reports.cucumber import STDERR_HEADING, _failing, _message, _step_status
from sbtck.reports.results import DIFFERS, ERROR, EXPECTED_FAILURE, FAILED, UNEXPECTED_PASS, ScenarioRecord
from sbtck.resources import features

NAME = "cucumber.ndjson"
# the version of the messages' schema these envelopes follow (cucumber/messages)
PROTOCOL = "34.2.0"
GHERKIN = "text/x.cucumber.gherkin+plain"
HOOK = "sbtck-after"
NS = 1_000_000_000


def _stamp(at: float) -> dict[str, int]:
    seconds = int(at)
    return {"seconds": seconds, "nanos": round((at - seconds) * NS) % NS}


def _duration(seconds: float) -> dict[str, int]:
    whole = int(seconds)
    return {"seconds": whole, "nanos": round((seconds - whole) * NS) % NS}


def _source(uri: str) -> str | None:
    """The text of the feature file URI (the kit's ``features/...``, or a path as the run named it)."""
    path = features() / uri.removeprefix("features/") if uri.startswith("features/") else Path(uri)
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _parsed(events: Any, uri: str, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """Cucumber's gherkinDocument and pickles of TEXT, or None where its parser does not take it. EVENTS is one
    parser for the whole stream: its ids are unique across the files."""
    source: Any = {"source": {"uri": uri, "data": text, "mediaType": GHERKIN}}
    made: list[dict[str, Any]] = [dict(e) for e in events.enum(source)]
    document = next((e["gherkinDocument"] for e in made if "gherkinDocument" in e), None)
    if document is None:
        return None
    return dict(document), [dict(e["pickle"]) for e in made if "pickle" in e]


def _made_pickle(record: ScenarioRecord, n: int) -> dict[str, Any]:
    """A pickle from results.json alone, for a feature file that cannot be read again."""
    return {
        "id": f"pickle-{n}",
        "uri": record.feature_path,
        "location": {"line": record.line},
        "name": record.name,
        "language": "en",
        "astNodeIds": [],
        "tags": [{"name": "@" + t, "astNodeId": ""} for t in record.tags],
        "steps": [
            {"id": f"pickle-{n}-step-{i}", "text": step.text, "astNodeIds": []} for i, step in enumerate(record.steps)
        ],
    }


def _definition(text: str) -> tuple[str, dict[str, Any]]:
    """The id and stepDefinition of the step reading TEXT: the kit's phrase, or a step of the project's own."""
    from sbtck.steps.phrases import PHRASES

    for name, phrase in PHRASES.items():
        if phrase.template.match(text) is not None:
            pattern = {"source": phrase.source, "type": "CUCUMBER_EXPRESSION"}
            return name, {"id": name, "pattern": pattern, "sourceReference": {"uri": "sbtck/steps/phrases.py"}}
    own = f"own:{text}"
    pattern = {"source": f"^{re.escape(text)}$", "type": "REGULAR_EXPRESSION"}
    return own, {"id": own, "pattern": pattern, "sourceReference": {}}


def envelopes(run: dict[str, Any], records: list[ScenarioRecord]) -> Iterator[dict[str, Any]]:
    yield {
        "meta": {
            "protocolVersion": PROTOCOL,
            "implementation": {"name": "sbtck", "version": __version__},
            "runtime": {"name": platform.python_implementation(), "version": platform.python_version()},
            "os": {"name": platform.system(), "version": platform.release()},
            "cpu": {"name": platform.machine() or "unknown"},
        }
    }
    ordered = sorted(records, key=lambda r: (r.feature_path, r.line, r.id))
    pickle_of: dict[str, dict[str, Any]] = {}
    made = itertools.count()
    from gherkin.stream.gherkin_events import GherkinEvents

    parser = GherkinEvents(GherkinEvents.Options(print_source=False, print_ast=True, print_pickles=True))
    for uri in dict.fromkeys(r.feature_path for r in ordered):
        text = _source(uri)
        parsed = _parsed(parser, uri, text) if text is not None else None
        if parsed is not None:
            yield {"source": {"uri": uri, "data": text, "mediaType": GHERKIN}}
            yield {"gherkinDocument": parsed[0]}
            yield from ({"pickle": p} for p in parsed[1])
        at_line = {p["location"]["line"]: p for p in parsed[1]} if parsed is not None else {}
        for r in (r for r in ordered if r.feature_path == uri):
            found = at_line.get(r.line)
            if found is None or len(found["steps"]) != len(r.steps):  # the file changed since the run, or is gone
                found = _made_pickle(r, next(made))
                yield {"pickle": found}
            pickle_of[r.id] = found
    definitions: dict[str, dict[str, Any]] = {}
    for r in ordered:
        for step in r.steps:
            key, definition = _definition(step.text)
            definitions.setdefault(key, definition)
    yield from ({"stepDefinition": d} for d in definitions.values())
    if any(r.status == UNEXPECTED_PASS or _hooked(r) for r in ordered):
        yield {"hook": {"id": HOOK, "name": "sbtck", "type": "AFTER_TEST_CASE", "sourceReference": {}}}
    started = dt.datetime.fromisoformat(str(run.get("started"))).timestamp() if run.get("started") else 0.0
    yield {"testRunStarted": {"id": "run", "timestamp": _stamp(started)}}
    at = started
    for n, record in enumerate(ordered):
        yield from _case(record, pickle_of[record.id], f"case-{n}", at)
        at += record.duration_s
    success = not any(r.status in (FAILED, ERROR, UNEXPECTED_PASS) for r in ordered)
    yield {"testRunFinished": {"success": success, "timestamp": _stamp(at), "testRunStartedId": "run"}}


def _hooked(record: ScenarioRecord) -> bool:
    """Does a failure outside the steps stand on the after hook (as cucumber.json's ``after``)?"""
    return _failing(record) is None and record.status in (FAILED, ERROR, EXPECTED_FAILURE)


def _case(record: ScenarioRecord, pickle: dict[str, Any], case: str, at: float) -> Iterator[dict[str, Any]]:
    failing = _failing(record)
    steps = [
        {
            "id": f"{case}-step-{i}",
            "pickleStepId": pickle_step["id"],
            "stepDefinitionIds": [_definition(step.text)[0]],
            "stepMatchArgumentsLists": [{"stepMatchArguments": []}],
        }
        for i, (step, pickle_step) in enumerate(zip(record.steps, pickle["steps"], strict=True))
    ]
    hook = record.status == UNEXPECTED_PASS or _hooked(record)
    if hook:
        steps.append({"id": f"{case}-after", "hookId": HOOK})
    yield {"testCase": {"id": case, "pickleId": pickle["id"], "testSteps": steps, "testRunStartedId": "run"}}
    started = f"{case}-attempt-0"
    yield {"testCaseStarted": {"id": started, "testCaseId": case, "attempt": 0, "timestamp": _stamp(at)}}
    for i, step in enumerate(record.steps):
        status = _step_status(record, i, failing)
        result: dict[str, Any] = {"status": status.upper(), "duration": _duration(step.duration_s)}
        if status in ("failed", "pending"):
            result["message"] = _message(record)
        elif i == failing and record.status == DIFFERS:
            result["message"] = f"differs ({record.reason}): {(record.failure or {}).get('message', '')}"
        yield {
            "testStepStarted": {"testCaseStartedId": started, "testStepId": f"{case}-step-{i}", "timestamp": _stamp(at)}
        }
        at += step.duration_s
        finished = {"testCaseStartedId": started, "testStepId": f"{case}-step-{i}", "timestamp": _stamp(at)}
        stderr = (record.failure or {}).get("stderr")
        if i == failing and stderr:  # as cucumber.json's output: the end of what the implementation said
            attached = {**_stderr_attachment(stderr), "testCaseStartedId": started, "testStepId": f"{case}-step-{i}"}
            yield {"attachment": attached}
        yield {"testStepFinished": {**finished, "testStepResult": result}}
    if hook:
        if record.status == UNEXPECTED_PASS:
            status, message = "FAILED", f"unexpected pass: {record.reason}, but it passed"
        else:
            status, message = ("PENDING" if record.status == EXPECTED_FAILURE else "FAILED"), _message(record)
        result = {"status": status, "duration": _duration(0), "message": message}
        yield {
            "testStepStarted": {"testCaseStartedId": started, "testStepId": f"{case}-after", "timestamp": _stamp(at)}
        }
        finished = {"testCaseStartedId": started, "testStepId": f"{case}-after", "timestamp": _stamp(at)}
        yield {"testStepFinished": {**finished, "testStepResult": result}}
    yield {"testCaseFinished": {"testCaseStartedId": started, "timestamp": _stamp(at), "willBeRetried": False}}


def _stderr_attachment(stderr: str) -> dict[str, Any]:
    return {
        "body": f"{STDERR_HEADING}\n{stderr}",
        "contentEncoding": "IDENTITY",
        "mediaType": "text/plain",
        "fileName": "stderr.txt",
    }


def write(run: dict[str, Any], records: list[ScenarioRecord], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for envelope in envelopes(run, records):
            out.write(json.dumps(envelope, ensure_ascii=False, default=str) + "\n")
    return path
