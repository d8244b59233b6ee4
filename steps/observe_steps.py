"""Then-steps: what the views and the event log must show.

Expectations sit in the feature's tables; these steps only compare, and a
mismatch prints the table it expected beside the log it got.
"""

from __future__ import annotations

from typing import Any

from sbtck import contract
from sbtck.agreement import arrangement, asked, asked_field, compares, repeats_in_an_instant
from sbtck.errors import LOG_FOLLOWS, CheckFailed, LogDiffers, ScenarioError
from sbtck.observations import FIELDS, Kind
from sbtck.steps import phrases
from sbtck.steps.cells import NULL, allows, as_compared, cell
from sbtck.steps.differs import count_differs, rows_differ
from sbtck.steps.vocabulary import step_for
from sbtck.steps.world import World

MONITORS = "sys.dm_broker_queue_monitors"
TASKS = "sys.dm_broker_activated_tasks"


def _rows_for(world: World, view: str, queue: str) -> list[dict[str, Any]]:
    ref = world.queue(queue)
    return [
        r
        for r in world.view(view)
        if (r["instance"], r["database"], r["queue"]) == (ref.instance, ref.database, ref.queue)
    ]


@step_for(phrases.HAS_MONITOR)
def has_monitor(world: World, queue: str, no: str) -> None:
    rows = _rows_for(world, MONITORS, queue)
    if len(rows) != (1 if no == "a" else 0):
        raise count_differs(world, MONITORS, 1 if no == "a" else 0, rows, f"for queue {queue!r}")


def _cell(world: World, column: str, value: Any) -> str:
    return cell(column, value, world.clock.start_ms)


def _expected(world: World, column: str, text: str) -> str:
    if column.endswith("_time") and text.startswith("second "):
        return f"second {world.seconds(text[len('second ') :]):g}"
    return as_compared(column, text)


@step_for(phrases.MONITOR_ROW)
def monitor_row(world: World, queue: str, datatable: list[list[str]]) -> None:
    rows = _rows_for(world, MONITORS, queue)
    if len(rows) != 1:
        raise count_differs(world, MONITORS, 1, rows, f"for queue {queue!r}")
    row = rows[0]
    columns = [column for column, _ in datatable]
    for column in columns:
        if column not in row:
            raise CheckFailed(f"{MONITORS} has no column {column!r}; it has {', '.join(row)}")
    got = [_cell(world, column, row[column]) for column in columns]
    want = [_expected(world, column, text) for column, text in datatable]
    if got != want:
        raise rows_differ(f"{MONITORS} for queue {queue!r}", columns, [want], [got])


@step_for(phrases.TASK_COUNT)
def task_count(world: World, count: str, queue: str) -> None:
    rows = _rows_for(world, TASKS, queue)
    want = 0 if count == "no" else int(count)
    if len(rows) != want:
        raise count_differs(world, TASKS, want, rows, f"for queue {queue!r}")


@step_for(phrases.TASK_ROWS)
def task_rows(world: World, queue: str, datatable: list[list[str]]) -> None:
    header, *expected = datatable
    rows = _rows_for(world, TASKS, queue)
    got = [[_cell(world, col, row.get(col)) for col in header] for row in rows]
    if got != expected:
        raise rows_differ(f"{TASKS} for queue {queue!r}", header, expected, got)


def _kind(name: str) -> str:
    return name.strip().replace(" ", "_")


def _matches_queue(world: World, event: contract.Event, queue: str | None) -> bool:
    if queue is None:
        return True
    ref = world.queue(queue)
    return (event.fields.get("instance"), event.fields.get("database"), event.fields.get("queue")) == (
        ref.instance,
        ref.database,
        ref.queue,
    )


def _mine(world: World, e: contract.Event, queue: str | None, dialog: str | None, instance: str | None) -> bool:
    return (
        _matches_queue(world, e, queue)
        and dialog in (None, e.fields.get("dialog"))
        and instance in (None, e.fields.get("instance"))
    )


def _span(world: World, since: str | None, until: str | None) -> list[contract.Event]:
    start = world.seconds(since) if since is not None else float("-inf")
    end = world.seconds(until) if until is not None else float("inf")
    return [e for e in world.log if start <= world.second_of(e) <= end]


def _render(world: World, event: contract.Event, header: list[str]) -> list[str]:
    """A row as the table reads it; a column applies only to the kinds that declare it as a field.

    An implementation may report more fields than a kind declares (a minor
    protocol version adds optional ones): a column names a field of some
    kinds in the table and reads NULL on the others, whatever they carry.
    """
    declared = FIELDS.get(event.kind)
    out = []
    for column in header:
        if column == "second":
            out.append(f"{world.second_of(event):g}")
        elif column == "event":
            out.append(event.kind.replace("_", " "))
        elif declared is not None and column not in declared:
            out.append(NULL)
        else:  # a field the event does not report is null (docs/protocol.md)
            out.append(_cell(world, column, event.fields.get(column)))
    return out


def _as_set_within_an_instant(
    events: list[contract.Event], got: list[list[str]], want: list[list[str]]
) -> list[list[str]]:
    """GOT with the rows of each instant put in the order of WANT's rows at the same places, where they match.

    The documents order the events of different instants, never the events of one: those compare as a set.
    """
    out = list(got)
    start = 0
    while start < len(events):
        end = start
        while end < len(events) and events[end].at_ms == events[start].at_ms:
            end += 1
        order = _matching(got[start:end], want[start:end])
        if order is not None:
            out[start:end] = [got[start + i] for i in order]
        start = end
    return out


def _first(
    events: list[contract.Event], rendered: list[list[str]], want: list[list[str]]
) -> tuple[list[contract.Event], list[list[str]]]:
    """The first len(WANT) events; of the last instant among them, those that match WANT's last rows if some do
    (the events of one instant compare as a set, so "first" cannot cut that instant by arrival)."""
    last_ms = events[len(want) - 1].at_ms
    before = sum(1 for e in events if e.at_ms < last_ms)
    at_last = [i for i, e in enumerate(events) if e.at_ms == last_ms]
    picked = _fitting([rendered[i] for i in at_last], want[before:])
    keep = list(range(before)) + (sorted(at_last[i] for i in picked) if picked else at_last[: len(want) - before])
    return [events[i] for i in keep], [rendered[i] for i in keep]


def _fitting(got: list[list[str]], want: list[list[str]]) -> list[int] | None:
    """Distinct rows of GOT matching WANT's row for row, if there are."""
    return arrangement(got, want, lambda w, g: all(map(allows, w, g)))


def _matching(got: list[list[str]], want: list[list[str]]) -> list[int] | None:
    """An order of GOT's rows that matches WANT's row for row, if there is one."""
    if len(got) != len(want) or len(got) < 2:
        return None
    return _fitting(got, want)


def _observable(world: World, header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The table without what the implementation is not asked for: rows of kinds beyond its capabilities (what
    only a decision trace shows), columns of the fields only a decision trace reports."""
    event = header.index("event")
    capabilities = world.profile.capabilities
    traced = [row for row in rows if not asked(_kind(row[event]), capabilities)]
    columns = [i for i, column in enumerate(header) if asked_field(column, capabilities)]
    kept = [[row[i] for i in columns] for row in rows if row not in traced]
    said = []
    if traced:
        counts: dict[str, int] = {}
        for row in traced:
            counts[row[event]] = counts.get(row[event], 0) + 1
        said.append("the rows " + ", ".join(f"{kind} x{n}" for kind, n in counts.items()))
    if len(columns) < len(header):
        said.append("the columns " + ", ".join(col for col in header if not asked_field(col, capabilities)))
    if said:
        world.leave_out(" and ".join(said), everything=not kept)
    return [header[i] for i in columns], kept


def _when(world: World, cell: str) -> str:
    """A time cell: "25", or "25 or 30" where the documents do not say whether a span's last instant counts."""
    return " or ".join(f"{world.seconds(part):g}" for part in cell.split(" or "))


@step_for(phrases.LOG_SHOWS)
def log_shows(
    world: World,
    queue: str | None,
    dialog: str | None,
    instance: str | None,
    how: str,
    since: str | None,
    until: str | None,
    datatable: list[list[str]],
) -> None:
    """The events of the kinds the table names (for the queue, if one is named) are exactly its rows, in order
    from one instant to the next; within one instant as a set. With ``first``, the first of them are."""
    header, *rows = datatable
    if "event" not in header:
        raise ScenarioError("a log table needs an 'event' column")
    header, rows = _observable(world, header, rows)
    if not rows:
        return
    kinds = {_kind(row[header.index("event")]) for row in rows}
    events = [e for e in _span(world, since, until) if e.kind in kinds and _mine(world, e, queue, dialog, instance)]
    again = repeats_in_an_instant([e.to_json() for e in events])  # several looks of one instant, one report
    events = [e for i, e in enumerate(events) if i not in again]
    want = [
        [
            _when(world, value) if col == "second" else as_compared(col, value)
            for col, value in zip(header, row, strict=True)
        ]
        for row in rows
    ]
    rendered = [_render(world, e, header) for e in events]
    if how == "each once":
        if "second" in header:
            raise ScenarioError("a log table that 'shows each once' compares rows without their time: drop 'second'")
        firsts = [i for i, row in enumerate(rendered) if row not in rendered[:i]]
        events, rendered = [events[i] for i in firsts], [rendered[i] for i in firsts]
    if how == "first" and len(events) > len(want):
        events, rendered = _first(events, rendered, want)
    got = _as_set_within_an_instant(events, rendered, want)
    event = header.index("event")
    # a free-text field (docs/protocol.md) says what the implementation likes: its cells are shown, not compared
    got = [
        [
            w if allows(w, g) or not compares(_kind(wrow[event]), column) else g
            for column, g, w in zip(header, grow, wrow, strict=True)
        ]
        for grow, wrow in zip(got, want, strict=False)
    ] + got[len(want) :]
    if got != want:
        where = f" for queue {queue!r}" if queue else f" for dialog {dialog!r}" if dialog else ""
        # a log check's message keeps the log after its tables: the page cuts it there (LOG_FOLLOWS)
        raise rows_differ(f"the log{where}", header, want, got, LogDiffers, f"{LOG_FOLLOWS}{world.log_text()}")


def _last_answer(world: World, session: str) -> contract.Event:
    answers = [
        e
        for e in world.log
        if e.fields.get("session") == session and e.kind in (Kind.ROWS_RETURNED, Kind.EMPTY_RESULT, Kind.READER_WAITING)
    ]
    if not answers:
        raise CheckFailed(f"session {session!r} has run no RECEIVE or GET CONVERSATION GROUP")
    return answers[-1]


def _messages(answer: contract.Event) -> list[str]:
    """The messages a RECEIVE returned, as a feature writes them: DIALOG:SEQUENCE."""
    return [f"{r['dialog']}:{r['message_sequence_number']}" for r in answer.fields.get("rows", [])]


def _answered(world: World, answer: contract.Event) -> str:
    """A session's answer in the feature's words: "rows returned D1:0, D1:1 at second 5"."""
    said = answer.kind.replace("_", " ")
    if answer.kind == Kind.ROWS_RETURNED:
        said += f" {', '.join(_messages(answer)) or '(none)'}"
    group = answer.fields.get("conversation_group")  # a GET CONVERSATION GROUP's answer
    return said + (f" (group {group})" if group is not None else "") + f" at second {world.second_of(answer):g}"


@step_for(phrases.SESSION_WAITING)
def session_waiting(world: World, session: str) -> None:
    last = _last_answer(world, session)
    if last.kind != Kind.READER_WAITING:
        raise CheckFailed(f"session {session!r} is not waiting; its last answer: {_answered(world, last)}")


@step_for(phrases.SESSION_EMPTY)
def session_empty(world: World, session: str) -> None:
    last = _last_answer(world, session)
    if last.kind != Kind.EMPTY_RESULT:
        raise CheckFailed(
            f"expected an empty result for session {session!r}; its last answer: {_answered(world, last)}"
        )


@step_for(phrases.SESSION_ROWS)
def session_rows(world: World, session: str, messages: str) -> None:
    """Messages are written DIALOG:SEQUENCE, comma-separated, in the order RECEIVE returned them; " or " separates
    answers that are equally allowed."""
    last = _last_answer(world, session)
    got = _messages(last)
    allowed = [[m.strip() for m in answer.split(",")] for answer in messages.split(" or ")]
    if last.kind != Kind.ROWS_RETURNED or got not in allowed:
        raise CheckFailed(
            f"session {session!r}: expected rows returned {' or '.join(', '.join(want) for want in allowed)}, "
            f"got {_answered(world, last)}"
        )


@step_for(phrases.SESSION_GROUP)
def session_group(world: World, session: str, dialog: str) -> None:
    last = _last_answer(world, session)
    want = next(
        (
            e.fields.get("conversation_group")
            for e in world.log
            if e.kind == Kind.MESSAGE_ARRIVED and e.fields.get("dialog") == dialog
        ),
        None,
    )
    got = last.fields.get("conversation_group")
    if want is None:
        raise CheckFailed(f"no message of dialog {dialog!r} has arrived, so it has no conversation group yet")
    if last.kind != Kind.ROWS_RETURNED or got != want:
        raise CheckFailed(
            f"session {session!r}: expected the group {want!r} of dialog {dialog!r}, got {_answered(world, last)}"
        )


@step_for(phrases.LOG_COUNTS)
def log_counts(
    world: World,
    queue: str | None,
    dialog: str | None,
    instance: str | None,
    least: str | None,
    count: str | None,
    event: str,
    field: str | None,
    value: str | None,
    since: str | None,
    until: str | None,
) -> None:
    capabilities = world.profile.capabilities
    if field is not None and not compares(_kind(event), field):
        raise ScenarioError(f"{event!r} events' {field} is free text (docs/protocol.md): no scenario counts by it")
    if not asked(_kind(event), capabilities) or (field is not None and not asked_field(field, capabilities)):
        world.leave_out(f"the {event!r} events" + (f" by {field}" if field else ""), everything=True)
        return
    if value is not None and "{" in value:  # a number from the open parameters: "{forward_hop_limit} + 1"
        value = f"{world.seconds(value):g}"
    found = [
        e
        for e in _span(world, since, until)
        if e.kind == _kind(event)
        and _mine(world, e, queue, dialog, instance)
        and (field is None or _cell(world, field, e.fields.get(field)) == as_compared(field, str(value)))
    ]
    if least is not None:
        floor = world.seconds(least)
        if len(found) < floor:
            raise CheckFailed(
                f"expected at least {floor:g} {event!r} events, got {len(found)}:\n{world.log_text(found)}"
            )
        return
    want = 0 if count == "no" else world.seconds(str(count))
    if len(found) != want:
        raise CheckFailed(f"expected {want:g} {event!r} events, got {len(found)}:\n{world.log_text(found)}")
