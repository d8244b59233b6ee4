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

from sbtck.observations import RECORDS, Kind
from sbtck.reports.text import escape

# the events of a message's way, and how each shows where it happens (observations.Record.way)
WAY = frozenset(kind for kind, r in RECORDS.items() if r.way)
ENDS = {Kind.MESSAGE_DROPPED, Kind.MESSAGE_LOST_IN_TRANSIT, Kind.FORWARDED_MESSAGE_DELETED, Kind.DISPATCHER_DELETED}
COLUMN, TOP, ROW, LEFT = 150, 44, 26, 56
FAILING = "#b02020"


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


def svg(events: list[dict[str, Any]], key: str, failing: set[str] | None = None) -> str:
    """The picture, or "" when no message crossed from one instance to another; KEY names its arrowhead, which
    must be unique in the page. The steps of the messages named in FAILING (``D1:2``, either end's; ``D1`` for
    every message of the dialog) are marked: the failing check is about them."""
    failing = failing or set()
    instances, drawn = steps(events)
    if not any(source is not None for _, source, _, _, _ in drawn):
        return ""
    x = {name: LEFT + COLUMN * (i + 0.5) for i, name in enumerate(instances)}
    width = LEFT + COLUMN * len(instances)
    height = TOP + ROW * len(drawn) + 10
    marked = sum(_marked(message, failing) for _, _, _, message, _ in drawn)
    said = f", {marked} of them of the message the failing check is about" if marked else ""
    parts = [
        f'<svg class="sequence" viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" '
        f'role="img" aria-label="where the messages went: {len(drawn)} steps between {len(instances)} instances'
        f'{escape(said)}" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<defs><marker id="{escape(key)}-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#246"/></marker></defs>'
        f'<text x="4" y="{TOP - 26}" font-size="10">second</text>'
    ]
    for name, column in x.items():
        parts.append(f'<text x="{column:.0f}" y="16" font-size="12" text-anchor="middle">{escape(name)}</text>')
        parts.append(f'<line x1="{column:.0f}" y1="{TOP - 18}" x2="{column:.0f}" y2="{height - 4}" stroke="#bbb"/>')
    last_second: float | None = None
    for row, (second, source, at, message, what) in enumerate(drawn):
        y = TOP + ROW * row
        if second != last_second:
            parts.append(f'<text x="4" y="{y + 4}" font-size="10">{second:g}</text>')
            last_second = second
        colour = "#b02020" if what in ("dropped", "lost", "deleted") else "#246"
        label = escape(f"{message} {what}")
        weight = ""
        if _marked(message, failing):  # a band across the row, and the label in bold with a cross
            parts.append(
                f'<rect class="failing" x="{LEFT - 4}" y="{y - ROW + 6}" width="{width - LEFT + 4}" '
                f'height="{ROW - 2}" fill="#fbe1e1" fill-opacity="0.8"/>'
            )
            label, weight = f"✘ {label}", ' font-weight="bold"'
        if source is None:
            parts.append(f'<circle cx="{x[at]:.0f}" cy="{y}" r="3.5" fill="{colour}"/>')
            parts.append(f'<text x="{x[at] + 7:.0f}" y="{y - 5}" font-size="10" fill="{colour}"{weight}>{label}</text>')
            continue
        # the arrow runs level at the row's foot, its label above it: never on the line
        parts.append(
            f'<line x1="{x[source]:.0f}" y1="{y}" x2="{x[at]:.0f}" y2="{y}" stroke="{colour}" '
            f'stroke-width="1.4" marker-end="url(#{escape(key)}-arrow)"/>'
        )
        middle = (x[source] + x[at]) / 2
        parts.append(
            f'<text x="{middle:.0f}" y="{y - 5}" font-size="10" text-anchor="middle" '
            f'fill="{colour}"{weight}>{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
