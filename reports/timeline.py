"""A scenario's frozen time drawn as inline SVG: queue depth, running readers, notifications, connections."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from sbtck.observations import Kind
from sbtck.reports.pages import draw

WIDTH, LEFT, ROW = 760, 150, 34


def _x(second: float, end: float) -> float:
    return LEFT + (WIDTH - LEFT - 10) * (second / end if end else 0)


def _step_path(points: list[tuple[float, int]], end: float, top: float, peak: int) -> str:
    """A step line for a count that changes at event times."""
    scale = (ROW - 8) / max(peak, 1)
    path, level = [], 0
    for second, value in points:
        path.append(f"L{_x(second, end):.1f},{top + ROW - 4 - level * scale:.1f}")
        level = value
        path.append(f"L{_x(second, end):.1f},{top + ROW - 4 - level * scale:.1f}")
    path.append(f"L{_x(end, end):.1f},{top + ROW - 4 - level * scale:.1f}")
    return f"M{_x(0, end):.1f},{top + ROW - 4:.1f}" + "".join(path)


def tracks(events: list[dict[str, Any]]) -> dict[str, list[tuple[float, int]]]:
    """Counts over time per track name, from the events of one scenario."""
    depth: dict[str, int] = {}
    readers: dict[str, int] = {}
    links: dict[str, int] = {}
    last_queue: dict[str, str] = {}
    out: dict[str, list[tuple[float, int]]] = {}

    def note(name: str, second: float, value: int) -> None:
        out.setdefault(name, []).append((second, value))

    for e in events:
        second, kind, queue = float(e.get("second", 0)), e.get("kind"), e.get("queue")
        if kind == Kind.MESSAGE_ARRIVED and queue:
            depth[queue] = depth.get(queue, 0) + 1
            note(f"queue depth: {queue}", second, depth[queue])
        elif kind == Kind.ROWS_RETURNED and queue:
            depth[queue] = depth.get(queue, 0) - len(e.get("rows") or [])
            last_queue[str(e.get("session"))] = queue
            note(f"queue depth: {queue}", second, depth[queue])
        elif kind == Kind.TRANSACTION_ROLLED_BACK and e.get("returned") and str(e.get("session")) in last_queue:
            queue = last_queue[str(e.get("session"))]
            depth[queue] = depth.get(queue, 0) + int(e["returned"])
            note(f"queue depth: {queue}", second, depth[queue])
        elif kind in (Kind.PROCEDURE_STARTED, Kind.PROCEDURE_EXITED) and queue:
            readers[queue] = readers.get(queue, 0) + (1 if kind == Kind.PROCEDURE_STARTED else -1)
            note(f"readers: {queue}", second, readers[queue])
        elif (kind == Kind.CONNECTION_ATTEMPT and e.get("result") == "connected") or kind == Kind.CONNECTION_CLOSED:
            link = f"connection: {e.get('instance')} to {str(e.get('address', '')).lower()}"
            links[link] = 1 if kind == Kind.CONNECTION_ATTEMPT else 0
            note(link, second, links[link])
    return out


def svg(events: list[dict[str, Any]]) -> Markup:
    """The timeline, or "" when the scenario has nothing to draw."""
    lines = tracks(events)
    notifications = sorted({float(e.get("second", 0)) for e in events if e.get("kind") == Kind.TIMER_NOTIFICATION})
    if not lines and not notifications:
        return Markup()
    end = max([float(e.get("second", 0)) for e in events] + [5.0])
    drawn = []
    for row, (name, points) in enumerate(sorted(lines.items()), start=1):
        peak = max([value for _, value in points] + [1])
        top = ROW * row
        path = _step_path(points, end, top, peak)
        drawn.append({"name": name[:26], "name_y": f"{top + ROW / 2 + 4:.0f}", "top": top, "peak": peak, "path": path})
    picture = {
        "width": WIDTH,
        "height": ROW * (len(lines) + 1) + 10,
        "left": LEFT,
        "end": f"{end:g}",
        "notifications": [(f"{_x(second, end):.1f}", f"{second:g}") for second in notifications],
        "tracks": drawn,
    }
    return draw("timeline.svg.j2", "timeline", picture)
