"""The situation matrix (tests/situations/matrix.py): every cell is set up by some scenario of the suite, or set
aside as impossible with why; and the states are read as a broker shows them."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import ROOT, kit
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


TWO = {
    "kind": "start",
    "at_ms": 0,
    "topology": {
        "instances": [
            {"name": "sql1", "databases": [{"name": "shop", "queues": [], "services": []}]},
            {"name": "sql2", "databases": [{"name": "orders", "queues": [], "services": []}]},
            {"name": "sql5", "databases": []},
        ]
    },
}
D1_0 = {"dialog": "D1", "from_target": False, "message_sequence_number": 0}


def _periodic(steps: list[tuple[dict[str, object], list[dict[str, object]]]]) -> set[str]:
    return {state for area, command, state in situations(steps) if area == "periodic" and command == "send"}


def test_a_message_waiting_in_a_forwarder_is_held_there_and_in_no_transmission_queue() -> None:
    sent = {"kind": "message_sent", "at_ms": 0, "instance": "sql1", "database": "shop", **D1_0}
    on = {"kind": "message_transmitted", "at_ms": 0, "instance": "sql1", "to_instance": "sql5", **D1_0}
    waits = {"kind": "transmission_pending", "at_ms": 0, "instance": "sql5", "status": "waiting", **D1_0}
    later = {"kind": "send", "at_ms": 1000, "dialog": "D2"}
    # the reference reports message_forwarded only when it sends the message on: the wait shows it held
    held = _periodic([(TWO, []), ({"kind": "send", "at_ms": 0, "dialog": "D1"}, [sent, on, waits]), (later, [])])
    assert "a forwarder holding a message" in held
    assert "a transmission queue holding a message" not in held
    # sent on from the forwarder, it is held no longer
    gone = {"kind": "message_transmitted", "at_ms": 500, "instance": "sql5", "to_instance": "sql2", **D1_0}
    steps = [(TWO, []), ({"kind": "send", "at_ms": 0, "dialog": "D1"}, [sent, on, waits, gone]), (later, [])]
    assert "a forwarder holding a message" not in _periodic(steps)
    # waiting at the instance that sent it, it waits in its transmission queue
    home = {**waits, "instance": "sql1"}
    queued = _periodic([(TWO, []), ({"kind": "send", "at_ms": 0, "dialog": "D1"}, [sent, home]), (later, [])])
    assert "a transmission queue holding a message" in queued
    assert "a forwarder holding a message" not in queued


def test_a_message_saved_from_the_dispatcher_is_held_there_no_longer() -> None:
    buffered = {"kind": "dispatcher_buffered", "at_ms": 0, "instance": "sql2", "database": "orders", **D1_0}
    saved = {"kind": "message_arrived", "at_ms": 0, "instance": "sql2", "database": "orders", **D1_0}
    later = {"kind": "send", "at_ms": 1000, "dialog": "D2"}
    assert "the dispatcher holding a message" in _periodic(
        [(TWO, []), ({"kind": "send", "at_ms": 0, "dialog": "D1"}, [buffered]), (later, [])]
    )
    assert "the dispatcher holding a message" not in _periodic(
        [(TWO, []), ({"kind": "send", "at_ms": 0, "dialog": "D1"}, [buffered, saved]), (later, [])]
    )


def test_a_clean_up_resumed_in_one_database_leaves_another_stopped() -> None:
    def stopped(database: str) -> dict[str, object]:
        return {"kind": "ack_cleanup_stopped", "at_ms": 0, "instance": "sql1", "database": database}

    resumed = {"kind": "ack_cleanup_resumed", "at_ms": 25000, "instance": "sql1", "database": "shop"}
    later = {"kind": "send", "at_ms": 26000, "dialog": "D1"}
    steps = [
        (TWO, []),
        ({"kind": "advance_time", "at_ms": 0}, [stopped("stock"), stopped("shop"), resumed]),
        (later, []),
    ]
    assert "the acknowledged-message clean-up stopped" in _periodic(steps)
    steps = [(TWO, []), ({"kind": "advance_time", "at_ms": 0}, [stopped("shop"), resumed]), (later, [])]
    assert "the acknowledged-message clean-up stopped" not in _periodic(steps)


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


def test_the_readme_states_the_matrix_as_it_is() -> None:
    every = list(cells())
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"a situation matrix of {len(every)} cells" in text
    assert f"in {len(every) - len(IMPOSSIBLE)} cells; the other {len(IMPOSSIBLE)} cannot arise" in text
