"""Steps that build the scene and act on it: topology, dialogs, queues, time."""

from __future__ import annotations

import re

from pytest_bdd import given, parsers

from sbtck import contract as c
from sbtck.errors import Refused, ScenarioError
from sbtck.fixtures import topology as topologies
from sbtck.steps.vocabulary import both
from sbtck.steps.world import World

NAME = r'"(?P<{}>[^"]+)"'


@given(parsers.re(r"the topology " + NAME.format("name")))
def named_topology(world: World, name: str) -> None:
    world.start(topologies.named(name))


@given("the topology:")
def inline_topology(world: World, docstring: str) -> None:
    path, line = world.step_at
    # the docstring's first line of text stands two lines below its step
    world.start(topologies.parse(docstring, path, line_offset=line + 1))


@both(
    r"dialog {} is begun from service {} to service {}".format(
        NAME.format("dialog"), NAME.format("initiator"), NAME.format("target")
    )
)
def begin_dialog(world: World, dialog: str, initiator: str, target: str) -> None:
    at = world.at()
    assert world.topology is not None
    instance, database, service = world.topology.service(initiator)
    world.run(c.BeginDialog(at, dialog, instance, database, service, target))


SEND = r"(?:a message is|(?P<count>\d+) messages are) sent on dialog " + NAME.format("dialog")


@both(SEND)
def send(world: World, dialog: str, count: str | None) -> None:
    for _ in range(int(count or 1)):
        world.run(c.Send(world.at(), dialog))


TIME = r"time passes to second (?P<second>.+)"


@both(TIME)
def time_passes(world: World, second: str) -> None:
    world.at()
    try:
        world.clock.move_to_second(world.seconds(second))
    except ValueError as exc:
        raise ScenarioError(f"time passes to second {second}: {exc}") from None
    world.run(c.AdvanceTime(world.clock.now_ms()))


ALTER = r"ALTER QUEUE {} WITH ACTIVATION \((?P<options>[^)]*)\)".format(NAME.format("queue"))
OPTION = re.compile(r"^\s*(STATUS|PROCEDURE_NAME|MAX_QUEUE_READERS)\s*=\s*(\S+)\s*$")


@both(ALTER)
def alter_queue(world: World, queue: str, options: str) -> None:
    values: dict[str, str] = {}
    for option in options.split(","):
        match = OPTION.match(option)
        if match is None:
            raise Refused(
                f"cannot read ACTIVATION option {option.strip()!r}: "
                "use STATUS = ON|OFF, PROCEDURE_NAME = name, MAX_QUEUE_READERS = n"
            )
        values[match.group(1)] = match.group(2)
    status = values.get("STATUS")
    if status not in (None, "ON", "OFF"):
        raise Refused(f"STATUS = {status}: write ON or OFF")
    readers = values.get("MAX_QUEUE_READERS")
    if readers is not None and not readers.isdigit():
        raise Refused(f"MAX_QUEUE_READERS = {readers}: write a whole number")
    world.run(
        c.AlterQueue(
            world.at(),
            world.queue(queue),
            status=status,
            procedure_name=values.get("PROCEDURE_NAME"),
            max_queue_readers=None if readers is None else int(readers),
        )
    )


CREATE = r"CREATE EVENT NOTIFICATION {} ON QUEUE {} FOR QUEUE_ACTIVATION".format(
    NAME.format("name"), NAME.format("queue")
)
DROP = r"DROP EVENT NOTIFICATION {} ON QUEUE {}".format(NAME.format("name"), NAME.format("queue"))


@both(CREATE)
def create_notification(world: World, name: str, queue: str) -> None:
    world.run(c.CreateEventNotification(world.at(), name, world.queue(queue)))


@both(DROP)
def drop_notification(world: World, name: str, queue: str) -> None:
    world.run(c.DropEventNotification(world.at(), name, world.queue(queue)))


EXIT = r"activated task (?P<task>\d+) of queue {} exits".format(NAME.format("queue"))


@both(EXIT)
def procedure_exits(world: World, task: str, queue: str) -> None:
    world.run(c.ExitProcedure(world.at(), world.queue(queue), int(task)))
