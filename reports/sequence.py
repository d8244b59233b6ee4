"""Where a scenario's messages went, drawn as a message-sequence picture in inline SVG.

Instances a message passes are columns, in the order they first show one; time runs down, one
row per event of a message's way (sent, transmitted, forwarded, dropped,
buffered, arrived, deleted), in the order the implementation reported them.
A message is a conversation's message (dialog, sequence number, and which
end sent it); an arrow joins the instance it was last at to the instance
where it shows next, labelled with the message (``D1:0``, a reply
``D1:0 reply``). What happens where it already is stands as a dot with its
event. The picture is drawn only where a message crossed from one instance
to another. No script, no fetch: the page stays self-contained.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from sbtck.observations import RECORDS, Kind
from sbtck.reports.pages import draw

# the events of a message's way, and how each shows where it happens (observations.Record.way)
WAY = frozenset(kind for kind, r in RECORDS.items() if r.way)
ENDS = {Kind.MESSAGE_DROPPED, Kind.MESSAGE_LOST_IN_TRANSIT, Kind.FORWARDED_MESSAGE_DELETED, Kind.DISPATCHER_DELETED}
COLUMN, TOP, ROW, LEFT = 150, 44, 26, 56


def _message(event: dict[str, Any]) -> tuple[str, str, bool] | None:
    dialog, number = event.get("dialog"), event.get("message_sequence_number")
    if dialog is None or number is None:
        return None
    return str(dialog), str(number), bool(event.get("from_target"))


def _name(message: tuple[str, str, bool]) -> str:
    return f"{message[0]}:{message[1]}" + (" reply" if message[2] else "")


def _marked(message: str, failing: set[str]) -> bool:
    """MESSAGE (``D1:2`` or ``D1:2 reply``) is one FAILING names, as ``D1:2`` or as its dialog ``D1``."""
    name = message.removesuffix(" reply")
    return name in failing or name.split(":")[0] in failing


def steps(events: list[dict[str, Any]]) -> tuple[list[str], list[tuple[float, str | None, str, str, str]]]:
    """The instances, and each step of a message's way: (second, from instance or None, at instance, message,
    what happened)."""
    instances: list[str] = []
    where: dict[tuple[str, str, bool], str] = {}
    drawn: list[tuple[float, str | None, str, str, str]] = []
    for event in events:
        instance = event.get("instance")
        kind, message = event.get("kind"), _message(event)
        if kind not in WAY or message is None or instance is None:
            continue
        at = str(instance)
        if at not in instances:
            instances.append(at)
        before = where.get(message)
        drawn.append(
            (float(event.get("second", 0)), before if before != at else None, at, _name(message), RECORDS[kind].way)
        )
        where[message] = at
    return instances, drawn


def svg(events: list[dict[str, Any]], key: str, failing: set[str] | None = None) -> Markup:
    """The picture, or "" when no message crossed from one instance to another; KEY names its arrowhead, which
    must be unique in the page. The steps of the messages named in FAILING (``D1:2``, either end's; ``D1`` for
    every message of the dialog) are marked: the failing check is about them."""
    failing = failing or set()
    instances, drawn = steps(events)
    if not any(source is not None for _, source, _, _, _ in drawn):
        return Markup()
    x = {name: LEFT + COLUMN * (i + 0.5) for i, name in enumerate(instances)}
    marked = sum(_marked(message, failing) for _, _, _, message, _ in drawn)
    rows: list[dict[str, Any]] = []
    last_second: float | None = None
    for row, (second, source, at, message, what) in enumerate(drawn):
        rows.append(
            {
                "y": TOP + ROW * row,
                "second": f"{second:g}" if second != last_second else None,  # a second is told once, where it starts
                "colour": "#b02020" if what in ("dropped", "lost", "deleted") else "#246",
                "label": f"{message} {what}",
                "marked": _marked(message, failing),
                "source": None if source is None else f"{x[source]:.0f}",
                "at": f"{x[at]:.0f}",
                "label_x": f"{x[at] + 7:.0f}" if source is None else f"{(x[source] + x[at]) / 2:.0f}",
            }
        )
        last_second = second
    picture = {
        "width": LEFT + COLUMN * len(instances),
        "height": TOP + ROW * len(drawn) + 10,
        "top": TOP,
        "left": LEFT,
        "row": ROW,
        "key": key,
        "said": f", {marked} of them of the message the failing check is about" if marked else "",
        "columns": [(name, f"{column:.0f}") for name, column in x.items()],
        "rows": rows,
    }
    return draw("sequence.svg.j2", "sequence", picture)
