"""The situation matrix (tests/situations/matrix.py): every cell is set up by some scenario of the suite, or set
aside as impossible with why; and the states are read as a broker shows them."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import kit
from tests.situations.matrix import IMPOSSIBLE, cells, covered, situations, table

START = {
    "kind": "start",
    "at_ms": 0,
    "topology": {
        "instances": [
            {
                "name": "sql1",
                "databases": [
                    {
                        "name": "db",
                        "queues": [{"name": "Q", "activation": {"status": "ON", "max_queue_readers": 1}}],
                        "services": [{"name": "S", "queue": "Q"}],
                    }
                ],
            }
        ]
    },
}
QUEUE = {"instance": "sql1", "database": "db", "queue": "Q"}


def test_every_situation_is_set_up_by_a_scenario(tmp_path: Path) -> None:
    run = kit(
        "run",
        "--iut",
        "python:tests.situations.recorder:recording",
        "--out",
        str(tmp_path / "out"),
        env={"SBTCK_SITUATIONS": str(tmp_path / "recorded")},
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    cover = covered(tmp_path / "recorded")
    print(table(cover))
    left = [cell for cell in cells() if cell not in cover and cell not in IMPOSSIBLE]
    assert not left, "no scenario sets up:\n" + "\n".join(" | ".join(cell) for cell in left)
    possible = {cell: sorted(cover[cell]) for cell in IMPOSSIBLE if cell in cover}
    assert not possible, f"set aside as impossible, yet set up by: {possible}"
    assert not set(IMPOSSIBLE) - set(cells()), "IMPOSSIBLE names a cell the matrix does not have"


def test_a_state_is_read_from_the_events_before_the_command() -> None:
    started = {"kind": "procedure_started", "at_ms": 1000, **QUEUE, "task": "1", "spid": 51, "procedure_name": "p"}
    arrived = {"kind": "message_arrived", "at_ms": 1000, **QUEUE, "dialog": "D1", "message_sequence_number": 0}
    receive = {"kind": "receive", "at_ms": 2000, "session": "S1", "queue": QUEUE}
    steps = [(START, []), ({"kind": "send", "at_ms": 1000, "dialog": "D1"}, [arrived, started]), (receive, [])]
    found = set(situations(steps))
    assert ("activation", "receive", "procedures running at the maximum") in found
    assert ("activation", "receive", "idle") not in found
    # the same RECEIVE before the procedure started: its answer's events at its own instant come after it
    early = [(START, []), ({**receive, "at_ms": 1000}, [arrived, started])]
    found = set(situations(early))
    assert ("activation", "receive", "idle") in found
    assert ("activation", "receive", "procedures running at the maximum") not in found


def test_a_queue_whose_monitor_is_removed_runs_no_time_out_and_withholds_nothing() -> None:
    """Dropping the last notification of a queue whose activation is off removes its monitor, and with it the
    time-out of the notification it raised: the reference reports no activation_time_out then."""
    notified = {"kind": "event_notification", "at_ms": 1000, **QUEUE, "notification": "N"}
    withheld = {"kind": "activation_withheld", "at_ms": 2000, **QUEUE, "reason": "notification time-out"}
    removed = {"kind": "monitor_removed", "at_ms": 3000, **QUEUE}
    alter = {"kind": "alter_queue", "at_ms": 4000, "queue": QUEUE, "status": None, "max_queue_readers": None}
    drop = {"kind": "drop_event_notification", "at_ms": 3000, "name": "N", "queue": QUEUE}
    steps = [(START, []), ({"kind": "send", "at_ms": 1000, "dialog": "D1"}, [notified, withheld]), (drop, [removed])]
    found = set(situations([*steps, (alter, [])]))
    assert ("activation", "drop_event_notification", "a notification time-out running") in found
    assert ("activation", "alter_queue", "a notification time-out running") not in found
    assert ("activation", "alter_queue", "activation found necessary and withheld") not in found
