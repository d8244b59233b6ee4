"""Steps that build the scene and act on it: topology, dialogs, queues, time."""

from __future__ import annotations

import re
from typing import Any

from sbtck import contract
from sbtck.errors import ScenarioError
from sbtck.fixtures import topology as topologies
from sbtck.steps import phrases
from sbtck.steps.vocabulary import step_for
from sbtck.steps.world import World


@step_for(phrases.NAMED_TOPOLOGY)
def named_topology(world: World, name: str) -> None:
    world.start(topologies.named(name))


@step_for(phrases.INLINE_TOPOLOGY)
def inline_topology(world: World, docstring: str) -> None:
    path, line = world.step_at
    # the docstring's first line of text stands two lines below its step
    world.start(topologies.parse(docstring, path, line_offset=line + 1))


@step_for(
    phrases.BEGIN_DIALOG,
    says=(
        contract.BeginDialog,
        lambda op, _: {
            "dialog": op["dialog"],
            "initiator": op["from_service"],
            "target": op["to_service"],
            "broker": op["to_broker_instance"],
        },
    ),
)
def begin_dialog(world: World, dialog: str, initiator: str, target: str, broker: str | None) -> None:
    at = world.at()
    instance, database, service = world.started.service(initiator)
    to_broker = None if broker is None else world.broker_instance(broker)
    world.run(contract.BeginDialog(at, dialog, instance, database, service, target, to_broker))


@step_for(phrases.SEND, says=(contract.Send, lambda op, _: None if op["from_target"] else {"dialog": op["dialog"]}))
def send(world: World, dialog: str, count: str | None) -> None:
    for _ in range(int(count or 1)):
        world.run(contract.Send(world.at(), dialog))


@step_for(
    phrases.TIME_PASSES, says=(contract.AdvanceTime, lambda op, start: {"second": f"{(op['at_ms'] - start) / 1000:g}"})
)
def time_passes(world: World, second: str) -> None:
    world.at()
    try:
        world.clock.move_to_second(world.seconds(second))
    except ValueError as exc:
        raise ScenarioError(f"time passes to second {second}: {exc}") from None
    world.run(contract.AdvanceTime(world.clock.now_ms()))


OPTION = re.compile(r"^\s*(STATUS|PROCEDURE_NAME|MAX_QUEUE_READERS)\s*=\s*(\S+)\s*$")


def _alter_options(op: dict[str, Any]) -> str:
    """An ALTER QUEUE command's options as ALTER_QUEUE says them."""
    options = [f"STATUS = {op['status']}"] if op["status"] else []
    readers = op["max_queue_readers"]
    return ", ".join(options + ([] if readers is None else [f"MAX_QUEUE_READERS = {readers}"]))


@step_for(
    phrases.ALTER_QUEUE,
    says=(contract.AlterQueue, lambda op, _: {"queue": op["queue"]["queue"], "options": _alter_options(op)}),
)
def alter_queue(world: World, queue: str, options: str) -> None:
    values: dict[str, str] = {}
    for option in options.split(","):
        match = OPTION.match(option)
        if match is None:
            raise ScenarioError(
                f"cannot read ACTIVATION option {option.strip()!r}: "
                "use STATUS = ON|OFF, PROCEDURE_NAME = name, MAX_QUEUE_READERS = n"
            )
        values[match.group(1)] = match.group(2)
    status = values.get("STATUS")
    if status not in (None, "ON", "OFF"):
        raise ScenarioError(f"STATUS = {status}: write ON or OFF")
    readers = values.get("MAX_QUEUE_READERS")
    if readers is not None and not readers.isdigit():
        raise ScenarioError(f"MAX_QUEUE_READERS = {readers}: write a whole number")
    world.run(
        contract.AlterQueue(
            world.at(),
            world.queue(queue),
            status=status,
            procedure_name=values.get("PROCEDURE_NAME"),
            max_queue_readers=None if readers is None else int(readers),
        )
    )


@step_for(
    phrases.CREATE_NOTIFICATION,
    says=(contract.CreateEventNotification, lambda op, _: {"name": op["name"], "queue": op["queue"]["queue"]}),
)
def create_notification(world: World, name: str, queue: str) -> None:
    world.run(contract.CreateEventNotification(world.at(), name, world.queue(queue)))


@step_for(
    phrases.DROP_NOTIFICATION,
    says=(contract.DropEventNotification, lambda op, _: {"name": op["name"], "queue": op["queue"]["queue"]}),
)
def drop_notification(world: World, name: str, queue: str) -> None:
    world.run(contract.DropEventNotification(world.at(), name, world.queue(queue)))


@step_for(
    phrases.PROCEDURE_EXITS,
    says=(contract.ExitProcedure, lambda op, _: {"task": op["task"], "queue": op["queue"]["queue"]}),
)
def procedure_exits(world: World, task: str, queue: str) -> None:
    world.run(contract.ExitProcedure(world.at(), world.queue(queue), int(task)))
