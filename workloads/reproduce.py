"""A shrunk world written as a .feature in the project's own step vocabulary.

Every contract command the generator writes has one step here. What should
be seen is stated as a log table: the events the reference engine gives for
the world, of the kinds the implementation reports, less the engine's
reasoning, allowing every history the documents allow there (``merged``: a
cell "a or b" where the reference on another branch of the choices they
leave open shows otherwise). The file then fails on the implementation with
the table it expected beside the log it got, passes a broker taking other
allowed choices, and can move into features/ as a regression scenario.
Where the table would not show the difference (it lies in a field or kind
the table leaves out), or the histories do not line up row for row, the
reproducer falls back to re-checking the recorded trace against the
reference, which searches them.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import yaml

from sbtck.agreement import BY_NUMBER, arrangement, compared_form, held, once_an_instant
from sbtck.errors import DeclarationError, NoStepFor
from sbtck.observations import (
    DECISION_FIELDS,
    DECISION_TRACE,
    ECHOES,
    FIRST_REQUIRED,
    MAY_OMIT,
    MAY_REPORT_AT_START,
    Kind,
    reported_by,
)
from sbtck.steps import phrases
from sbtck.steps.cells import allows, cell
from sbtck.steps.vocabulary import sayings
from sbtck.workloads.generate import WAITING_VIEWS, StageWorld

THEN = f"    Then {phrases.INVARIANTS_HOLD.source}\n    And {phrases.SAME_AS_REFERENCE.source}\n"
# the columns a stated log may have, in this order; one no row fills is left out
COLUMNS = ("instance", "database", "queue", "dialog", "message_sequence_number", "session", "reason")
# and where the difference lies in the engine's reasoning, the fields that carry it
REASONING_COLUMNS = ("rule", "trigger", "step", "route", "tasks")
Rows = list[list[str]]
# never a column of its own: the kind and instant are the table's first two, a conversation group is compared by
# what it holds (not by its name, which a table would state) and a RECEIVE's rows are no cell
NOT_STATED = frozenset({"kind", "at_ms", "conversation_group", "rows"})


def topology_yaml(plain: dict[str, Any]) -> str:
    """The contract's plain topology in the mapping form topology files use."""
    instances: dict[str, Any] = {}
    for i in plain["instances"]:
        databases: dict[str, Any] = {}
        for d in i["databases"]:
            db: dict[str, Any] = {"broker_instance": d["broker_instance"]}
            if d["procedures"]:
                db["procedures"] = {proc["name"]: _procedure(proc) for proc in d["procedures"]}
            db["queues"] = {q["name"]: {"activation": _activation(q["activation"])} for q in d["queues"]}
            db["services"] = {s["name"]: {"queue": s["queue"]} for s in d["services"]}
            if d["event_notifications"]:
                db["event_notifications"] = {n["name"]: {"queue": n["queue"]} for n in d["event_notifications"]}
            if d["mirroring_role"]:
                db["mirroring_role"] = d["mirroring_role"]
            if not d["master_key"]:
                db["master_key"] = False
            db.update(_routes(d["routes"], "routes"))
            databases[d["name"]] = db
        spec: dict[str, Any] = {"address": i["address"], "cpus": i["cpus"]}
        if i["message_forwarding"]:
            spec["message_forwarding"] = "ON"
        spec.update(_routes(i["msdb_routes"], "msdb_routes"))
        spec["databases"] = databases
        instances[i["name"]] = spec
    return yaml.safe_dump({"instances": instances}, sort_keys=False, width=200)


def writable(plain: dict[str, Any]) -> bool:
    """Would a topology file with this content pass the kit's checks?"""
    from sbtck.fixtures.topology import parse

    try:
        parse(topology_yaml(plain), "a shrunk world")
    except DeclarationError:
        return False
    return True


def _procedure(proc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"receives": proc["receives"], "receive_top": proc["receive_top"]}
    if proc["waitfor_ms"] is not None:
        out["waitfor_s"] = proc["waitfor_ms"] / 1000
    if proc["work_ms"]:
        out["work_s"] = proc["work_ms"] / 1000
    return out


def _activation(a: dict[str, Any]) -> dict[str, Any]:
    out = {"status": a["status"], "max_queue_readers": a["max_queue_readers"]}
    if a["procedure_name"] is not None:
        out["procedure_name"] = a["procedure_name"]
    return out


def _routes(routes: list[dict[str, Any]], key: str) -> dict[str, Any]:
    auto = [r for r in routes if r["name"] == "AutoCreatedLocal" and r["address"] == "LOCAL" and not r["service_name"]]
    out: dict[str, Any] = {} if auto else {"auto_created_local": False}
    declared = {}
    for r in routes:
        if r in auto:
            continue
        spec = {
            k: r[k]
            for k in ("service_name", "broker_instance", "address", "mirror_address", "lifetime_s")
            if r.get(k) is not None
        }
        declared[r["name"]] = spec
    if declared:
        out[key] = declared
    return out


def step(op: dict[str, Any], start_ms: int) -> str | None:
    """The step that runs this command, or None for one the Then steps run themselves: the first phrase whose step
    says a command of its kind and says this one (sbtck/steps/vocabulary.py)."""
    if op["kind"] == "query_view" and op["view"] in WAITING_VIEWS:
        return None
    for phrase, saying in sayings().get(op["kind"], []):
        values = saying(op, start_ms)
        if values is not None:
            return phrase.text(**values)
    raise NoStepFor(f"no step in the vocabulary writes a {op['kind']!r} command: {op}")


# what an implementation may leave out or say again is never stated: a broker with no BCN client fires none, one
# that does not echo the kit's faults or reports a failure only the first time is as right as one that does, and
# nothing says a dialog is acknowledged once only (the stage leaves repeats out: differential._repeats_left_out)
UNSTATED = MAY_OMIT | ECHOES | FIRST_REQUIRED.keys() | {Kind.ACKNOWLEDGED}
# a field compared by its number is a column only where its number differs; where the world has identical routes,
# which member names their group is open (RTC-0) and a cell names members: then it is no column at all
BY_NUMBER_FIELDS = frozenset(name for _, name in BY_NUMBER)


def stated(events: list[dict[str, Any]], capabilities: frozenset[str], reasoning: bool = False) -> list[dict[str, Any]]:
    """The events a reproducer states: what an implementation with these capabilities reports, less DECISION_TRACE
    and the reports whose presence and moment are not compared (as the stage does not), a report of what an instant
    came to once (as the Then step reads the log)."""
    return once_an_instant(
        [
            e
            for e in events
            if (reasoning or e["kind"] not in DECISION_TRACE)
            and e["kind"] not in UNSTATED
            and held(e["kind"])
            and reported_by(e["kind"], capabilities)
        ]
    )


def differing_fields(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    """The fields, beyond the kind and the instant, whose values differ between the two logs kind by kind (compared
    as the stage compares them): a stated table carries each as a column, so that it shows the difference."""
    names = dict.fromkeys(k for e in [*expected, *got] for k in e if k not in NOT_STATED)

    def values(events: list[dict[str, Any]], name: str) -> list[str]:
        return sorted(
            json.dumps([e["kind"], compared_form(e["kind"], name, e[name])], sort_keys=True, default=str)
            for e in events
            if e.get(name) is not None
        )

    return [name for name in names if values(expected, name) != values(got, name)]


def log_table(
    expected: list[list[dict[str, Any]]],
    got: list[dict[str, Any]],
    start_ms: int,
    reasoning: bool = False,
    named_freely: bool = False,
) -> tuple[list[Rows], Rows]:
    """The table of each history's expected events, and the same table for the events got (as the Then step would
    read it), all with the columns any of them needs."""
    kinds = {e["kind"] for events in expected for e in events}
    got = [e for e in got if e["kind"] in kinds]
    wanted = COLUMNS + REASONING_COLUMNS if reasoning else COLUMNS
    every = [e for events in expected for e in events]
    unnamed = BY_NUMBER_FIELDS if named_freely else frozenset()
    columns = [c for c in wanted if any(e.get(c) is not None for e in [*every, *got])]
    # the fields got differs in from some history (from all of them at once, every field would seem to differ)
    differing = dict.fromkeys(c for events in expected for c in differing_fields(events, got))
    columns += [
        c for c in differing if c not in columns and c not in unnamed and (reasoning or c not in DECISION_FIELDS)
    ]
    header = ["second", "event", *columns]

    def rows(events: list[dict[str, Any]]) -> Rows:
        return [
            [
                f"{(e['at_ms'] - start_ms) / 1000:g}",
                e["kind"].replace("_", " "),
                *(cell(c, e.get(c), start_ms) for c in columns),
            ]
            for e in events
        ]

    return [[header, *rows(events)] for events in expected], [header, *rows(got)]


def merged(tables: list[Rows]) -> Rows | None:
    """One table allowing each of TABLES, a cell "a or b" where they differ (as a scenario writes what the
    documents leave open), or None where their rows do not line up: another number of rows, or another event at a
    place. It allows more than the histories did (a cell's options combine freely), never less."""
    event = tables[0][0].index("event")

    def line_up(tables: list[Rows]) -> bool:
        first = tables[0]
        return all(
            len(t) == len(first) and all(r[event] == f[event] for r, f in zip(t, first, strict=True)) for t in tables
        )

    if not line_up(tables):
        # the rows of one instant compare as a set (the log step): put in one order in every table, they may
        tables = [[t[0], *sorted(t[1:], key=lambda row: (float(row[0]), row))] for t in tables]
        if not line_up(tables):
            return None
    first = tables[0]
    return [
        [" or ".join(dict.fromkeys(t[i][j] for t in tables)) for j in range(len(first[i]))] for i in range(len(first))
    ]


def _allowed_by(want: Rows, seen: Rows) -> bool:
    """Whether the rows SEEN pass the table WANT as the log step reads it: each cell one of its options, the rows
    of one instant (consecutive rows of one second) in any order."""
    if len(seen) != len(want):
        return False
    wanted, rows = want[1:], seen[1:]
    start = 0
    while start < len(rows):
        end = start
        while end < len(rows) and rows[end][0] == rows[start][0]:
            end += 1
        fits = arrangement(rows[start:end], wanted[start:end], lambda w, g: all(map(allows, w, g)))
        if fits is None:
            return False
        start = end
    return True


def _table(rows: Rows) -> list[str]:
    rows = [[v.replace("\\", "\\\\").replace("|", "\\|") for v in r] for r in rows]  # Gherkin's escapes
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["      | " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |" for r in rows]


def then_steps(
    expected: list[dict[str, Any]],
    got: list[dict[str, Any]],
    capabilities: frozenset[str],
    start_ms: int,
    others: list[list[dict[str, Any]]] | None = None,
    named_freely: bool = False,
) -> str:
    """The Then steps: the stated log where it shows the difference, else the re-check against the reference.

    What a broker shows is stated first; only where the difference lies in
    the engine's reasoning alone (which activation it found necessary, which
    tasks a timer notification ran) is the reasoning stated too. A kind the
    implementation reports and the reference does not is stated as absent,
    in a step of its own. OTHERS are the world's other allowed histories: the
    table allows each (``merged``); where they do not line up as one log, a
    table of each kind they line up in is stated (the log step reads the
    kinds its table names), and where none of those shows the difference, no
    log is.
    """
    histories = [expected, *(others or [])]
    # a kind the documents let an implementation leave out (MAY_OMIT) is not stated where it left it out
    omitted = MAY_OMIT - {e["kind"] for e in got}
    for reasoning in (False, True):
        mine = [[e for e in stated(h, capabilities, reasoning) if e["kind"] not in omitted] for h in histories]
        theirs = stated(got, capabilities, reasoning)
        # a kind reported at start where the documents let a broker report it then or not (database_broker_started)
        # is no kind the reference leaves out
        shown = {e["kind"] for e in theirs if not (e["kind"] in MAY_REPORT_AT_START and e.get("at_ms") == start_ms)}
        absent = sorted(shown - {e["kind"] for h in mine for e in h})
        tables, seen = log_table(mine, theirs, start_ms, reasoning, named_freely)
        want = merged(tables)
        if want is not None:
            if len(want) > 1 and (not _allowed_by(want, seen) or absent):
                return _then([want], absent)
            continue
        kinds: list[Rows] = []
        differs = bool(absent)
        for kind in dict.fromkeys(e["kind"] for h in mine for e in h):
            tables, seen = log_table(
                [[e for e in h if e["kind"] == kind] for h in mine],
                [e for e in theirs if e["kind"] == kind],
                start_ms,
                reasoning,
                named_freely,
            )
            want = merged(tables)
            if want is not None and len(want) > 1:
                kinds.append(want)
                differs = differs or not _allowed_by(want, seen)
        if differs:
            return _then(kinds, absent)
    return THEN


def _then(tables: list[Rows], absent: list[str]) -> str:
    lines: list[str] = []
    for table in tables:
        lines += [f"    {'And' if lines else 'Then'} {phrases.LOG_SHOWS.text(how='exactly')}", *_table(table)]
    lines += [
        f"    {'And' if lines else 'Then'} {phrases.LOG_COUNTS.text(count='no', event=kind.replace('_', ' '))}"
        for kind in absent
    ]
    lines.append(f"    And {phrases.INVARIANTS_HOLD.source}")
    return "\n".join(lines) + "\n"


def feature(
    world: StageWorld,
    rules: list[str],
    implementation: str,
    found_by: str,
    then: str = THEN,
    chose_otherwise: bool = False,
    open_choice: bool = False,
) -> str:
    """A feature with one scenario: the shrunk world, tagged with the rules it breaks. CHOSE_OTHERWISE: the
    implementation took another of the ways the documents allow somewhere in the world; OPEN_CHOICE: the
    documents allow the world histories whose logs differ; either way no log is stated."""
    start = world.start_ms
    steps = [s for s in (step(op, start) for op in world.script[1:]) if s is not None]
    if not steps:
        steps = ["time passes to second 0"]
    *given, last = steps
    topology = textwrap.indent(topology_yaml(world.topology), " " * 6)
    lines = [f"@workload {' '.join('@' + r for r in rules)}".rstrip()]
    lines.append(f"Feature: Workload world {world.seed}, shrunk")
    lines.append("")
    lines.append(f"  Found by the workload stage ({found_by}) against {implementation}:")
    lines.append(f"  world {world.seed} of generator version {world.version}, shrunk to {len(steps)} steps.")
    if chose_otherwise:
        lines.append("  The implementation took another of the choices the documents leave open than the reference")
        lines.append("  engine takes: a stated log would hold one of them against the other, so the check searches.")
    elif then != THEN and " or " in then:
        lines.append('  A cell "a or b" is a choice the documents leave open in this world: the log allows each.')
    elif open_choice:
        lines.append("  The documents leave a choice open in this world that shows in its log: a stated log would hold")
        lines.append("  one allowed history against the others, so the check searches them.")
    lines.append("")
    lines.append(f"  Scenario: [1] World {world.seed} breaks {', '.join(rules)}")
    lines.append("    Given the topology:")
    lines.append('      """')
    lines.extend(topology.rstrip("\n").split("\n"))
    lines.append('      """')
    if then == THEN:  # the searched check judges a refusal one allowed history makes and another does not
        lines.append(f"    And {phrases.REFUSALS_RECORDED.source}")
    lines.extend(f"    And {s}" for s in given)
    lines.append(f"    When {last}")
    return "\n".join(lines) + "\n" + then
