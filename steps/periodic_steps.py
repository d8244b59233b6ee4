"""Steps for the periodic tasks: faults of the transport, dispatcher, transmitter and brokers."""

from __future__ import annotations

from typing import Any

from sbtck import contract
from sbtck.errors import ScenarioError
from sbtck.steps import phrases
from sbtck.steps.cells import cell
from sbtck.steps.differs import count_differs, rows_differ, shown
from sbtck.steps.vocabulary import step_for
from sbtck.steps.world import World


@step_for(
    phrases.HANDLERS_FAIL,
    says=(contract.FailTaskHandlers, lambda op, _: {"count": op["count"], "instance": op["instance"]}),
)
def handlers_fail(world: World, count: str, instance: str) -> None:
    world.run(contract.FailTaskHandlers(world.at(), world.instance(instance), int(count)))


def _saving(op: dict[str, Any]) -> dict[str, Any]:
    """A dispatcher saving command as DISPATCHER_SAVING says it."""
    if op["mode"] == "stopped":
        return {"how": "stops saving messages"}
    return {"delay": op["delay_s"]} if op["delay_s"] else {"how": "saves messages again"}


@step_for(
    phrases.DISPATCHER_SAVING,
    says=(contract.SetDispatcherSaving, lambda op, _: {"instance": op["instance"], **_saving(op)}),
)
def dispatcher_saving(world: World, instance: str, how: str | None, delay: str | None) -> None:
    mode = "stopped" if how == "stops saving messages" else "running"
    world.run(contract.SetDispatcherSaving(world.at(), world.instance(instance), mode, float(delay or 0)))


@step_for(
    phrases.LOSE,
    says=(
        contract.LoseInTransit,
        lambda op, _: (
            None
            if op["from_target"]
            else {
                "sequence": op["sequence"],
                "dialog": op["dialog"],
                "every": "every transmission of" if op.get("every") else None,
            }
        ),
    ),
)
def lose(world: World, every: str | None, sequence: str, dialog: str) -> None:
    world.run(contract.LoseInTransit(world.at(), dialog, int(sequence), every=every is not None))


@step_for(
    phrases.CONNECTION_DROPS,
    says=(contract.DropConnection, lambda op, _: {"instance": op["instance"], "address": op["address"]}),
)
def connection_drops(world: World, instance: str, address: str) -> None:
    world.run(contract.DropConnection(world.at(), world.instance(instance), address))


@step_for(
    phrases.TRANSMISSION_FAILS,
    says=(
        contract.FailTransmission,
        lambda op, _: {
            "dialog": op["dialog"],
            "why": "for lack of memory" if op["reason"] == "resource" else "security validation",
        },
    ),
)
def transmission_fails(world: World, dialog: str, why: str) -> None:
    world.run(contract.FailTransmission(world.at(), dialog, "resource" if why.endswith("memory") else "security"))


@step_for(
    phrases.MASTER_KEY,
    says=(contract.CreateMasterKey, lambda op, _: {"database": op["database"], "instance": op["instance"]}),
)
def master_key(world: World, database: str, instance: str) -> None:
    world.run(contract.CreateMasterKey(world.at(), world.instance(instance), database))


@step_for(
    phrases.CLEANUP_STOPS,
    says=(contract.StopAckCleanup, lambda op, _: {"database": op["database"], "instance": op["instance"]}),
)
def cleanup_stops(world: World, database: str, instance: str) -> None:
    world.run(contract.StopAckCleanup(world.at(), world.instance(instance), database))


def _rows(world: World, view: str, instance: str) -> list[dict[str, Any]]:
    return list(world.run(contract.QueryView(world.at(), view, world.instance(instance))).get("rows", []))


CONNECTIONS = "sys.dm_broker_connections"


@step_for(phrases.HAS_CONNECTION)
def has_connection(world: World, instance: str, no: str, address: str) -> None:
    # an address names a host and port: the documents say nothing of case, so none is asked
    wanted = address.upper()
    rows = [r for r in _rows(world, CONNECTIONS, instance) if str(r["address"]).upper() == wanted]
    if len(rows) != (1 if no == "a" else 0):
        raise count_differs(world, CONNECTIONS, 1 if no == "a" else 0, rows, f"for address {address!r}", instance)


VIEW_COUNTS = {
    "the dispatcher of": "sbtck.dispatcher_buffers",
    "the forwarder of": "sbtck.forwarder",
    "the transmission queue of": "sys.transmission_queue",
}


@step_for(phrases.HOLDS)
def holds(world: World, what: str, instance: str, count: str) -> None:
    rows = _rows(world, VIEW_COUNTS[what], instance)
    want = 0 if count == "no" else int(count)
    if len(rows) != want:
        raise count_differs(world, VIEW_COUNTS[what], want, rows, on=instance)


# the columns that name a message held and say since when: what a check of one message shows of its rows
HELD = ("dialog", "message_sequence_number", "from_target", "received_ms")


def _message_rows(world: World, what: str, instance: str, message: str) -> list[dict[str, Any]]:
    dialog, colon, sequence = message.partition(":")
    if not colon or not sequence.strip().isdigit():
        raise ScenarioError(f"a message is written DIALOG:SEQUENCE, as D1:0; got {message!r}")
    return [
        r
        for r in _rows(world, VIEW_COUNTS[what], instance)
        if r["dialog"] == dialog and r["message_sequence_number"] == int(sequence) and not r["from_target"]
    ]


def _expected(world: World, message: str, received: str) -> list[list[str]]:
    """The row a check of MESSAGE (DIALOG:SEQUENCE, sent by the initiator) expects, its received_ms cell RECEIVED."""
    dialog, _, sequence = message.partition(":")
    named = {"dialog": dialog, "message_sequence_number": int(sequence), "from_target": False}
    return [[*shown(world, HELD[:-1], [named])[0], received]]


@step_for(phrases.HOLDS_MESSAGE)
def holds_message(world: World, what: str, instance: str, none: str | None, message: str, second: str) -> None:
    by = world.clock.start_ms + round(world.seconds(second) * 1000)
    rows = _message_rows(world, what, instance, message)
    received = [r for r in rows if isinstance(r["received_ms"], int | float) and r["received_ms"] <= by]
    view = VIEW_COUNTS[what]
    if none and received:  # each copy that came by then is a row not expected
        raise rows_differ(f"{view} on {instance}", HELD, [], shown(world, HELD, received))
    if not none and not received:
        expected = _expected(world, message, f"by second {world.seconds(second):g}")
        raise rows_differ(f"{view} on {instance}", HELD, expected, shown(world, HELD, rows))


@step_for(phrases.HELD_SINCE)
def held_since(world: World, what: str, instance: str, message: str, second: str) -> None:
    rows = _message_rows(world, what, instance, message)
    want = world.clock.start_ms + round(world.seconds(second) * 1000)
    view = VIEW_COUNTS[what]
    if len(rows) != 1 or rows[0]["received_ms"] != want:  # an integer: the answer checks hold columns to their types
        expected = _expected(world, message, cell("received_ms", want, world.clock.start_ms))
        raise rows_differ(f"{view} on {instance}", HELD, expected, shown(world, HELD, rows))


PERIODIC_STATE = "sbtck.periodic_state"
HANDLERS = ("instance", "task_handlers", "running_task_handlers")


@step_for(phrases.RUNNING_HANDLERS)
def running_handlers(world: World, instance: str, down: str | None) -> None:
    rows = _rows(world, PERIODIC_STATE, instance)
    if not rows:
        raise count_differs(world, PERIODIC_STATE, 1, rows, on=instance)
    kept, running = rows[0]["task_handlers"], rows[0]["running_task_handlers"]
    want = {**rows[0], "running_task_handlers": kept - int(down or 0)}
    if running != want["running_task_handlers"]:
        raise rows_differ(
            f"{PERIODIC_STATE} on {instance}",
            HANDLERS,
            shown(world, HANDLERS, [want]),
            shown(world, HANDLERS, rows[:1]),
        )
