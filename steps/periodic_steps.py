"""Steps for the periodic tasks: faults of the transport, dispatcher, transmitter and brokers."""

from __future__ import annotations

from typing import Any

from sbtck import contract
from sbtck.errors import LOG_FOLLOWS, ScenarioError
from sbtck.steps import phrases
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


@step_for(phrases.HAS_CONNECTION)
def has_connection(world: World, instance: str, no: str, address: str) -> None:
    # an address names a host and port: the documents say nothing of case, so none is asked
    wanted = address.upper()
    rows = [r for r in _rows(world, "sys.dm_broker_connections", instance) if str(r["address"]).upper() == wanted]
    assert len(rows) == (1 if no == "a" else 0), f"connections of {instance}: {rows}{LOG_FOLLOWS}{world.log_text()}"


VIEW_COUNTS = {
    "the dispatcher of": "sbtck.dispatcher_buffers",
    "the forwarder of": "sbtck.forwarder",
    "the transmission queue of": "sys.transmission_queue",
}


@step_for(phrases.HOLDS)
def holds(world: World, what: str, instance: str, count: str) -> None:
    rows = _rows(world, VIEW_COUNTS[what], instance)
    want = 0 if count == "no" else int(count)
    assert len(rows) == want, (
        f"{what} {instance}: expected {want} message(s), got {rows}{LOG_FOLLOWS}{world.log_text()}"
    )


def _message_rows(world: World, what: str, instance: str, message: str) -> list[dict[str, Any]]:
    dialog, colon, sequence = message.partition(":")
    if not colon or not sequence.strip().isdigit():
        raise ScenarioError(f"a message is written DIALOG:SEQUENCE, as D1:0; got {message!r}")
    return [
        r
        for r in _rows(world, VIEW_COUNTS[what], instance)
        if r["dialog"] == dialog and r["message_sequence_number"] == int(sequence) and not r["from_target"]
    ]


@step_for(phrases.HOLDS_MESSAGE)
def holds_message(world: World, what: str, instance: str, none: str | None, message: str, second: str) -> None:
    by = world.clock.start_ms + round(world.seconds(second) * 1000)
    rows = _message_rows(world, what, instance, message)
    received = [r for r in rows if isinstance(r["received_ms"], int | float) and r["received_ms"] <= by]
    if none:
        assert not received, f"{what} {instance}: expected no copy of {message} received by second {second}, got {rows}"
    else:
        assert received, f"{what} {instance}: expected {message} received by second {second}, got {rows}"


@step_for(phrases.HELD_SINCE)
def held_since(world: World, what: str, instance: str, message: str, second: str) -> None:
    rows = _message_rows(world, what, instance, message)
    want = world.clock.start_ms + round(world.seconds(second) * 1000)
    assert len(rows) == 1, (
        f"{what} {instance}: expected one row for {message}, got {rows}{LOG_FOLLOWS}{world.log_text()}"
    )
    got = rows[0]["received_ms"]  # an integer: the answer checks hold columns to their declared types
    since = f"second {(got - world.clock.start_ms) / 1000:g}"
    assert got == want, (
        f"{what} {instance}: {message} held since {since}, expected since second {second}"
        f"{LOG_FOLLOWS}{world.log_text()}"
    )


@step_for(phrases.RUNNING_HANDLERS)
def running_handlers(world: World, instance: str, down: str | None) -> None:
    rows = _rows(world, "sbtck.periodic_state", instance)
    assert rows, f"no periodic state for {instance}"
    kept, running = rows[0]["task_handlers"], rows[0]["running_task_handlers"]
    want = kept - int(down or 0)
    assert running == want, (
        f"{instance}: expected {want} running task handlers (of the {kept} it keeps), got {running}"
        f"{LOG_FOLLOWS}{world.log_text()}"
    )
