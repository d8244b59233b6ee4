"""Steps for the periodic tasks: faults of the transport, dispatcher, transmitter and brokers."""

from __future__ import annotations

from pytest_bdd import parsers, then

from sbtck import contract as c
from sbtck.steps.vocabulary import both
from sbtck.steps.world import World

INSTANCE = r'"(?P<instance>[^"]+)"'
DB_OF = r'database "(?P<database>[^"]+)" (?:on|of) "(?P<instance>[^"]+)"'


@both(r"(?P<count>\d+) task handlers? of " + INSTANCE + " fails?")
def handlers_fail(world: World, count: str, instance: str) -> None:
    world.run(c.FailTaskHandlers(world.at(), world.instance(instance), int(count)))


@both(
    r"the dispatcher of " + INSTANCE + r" (?P<how>stops saving messages|saves messages again"
    r"|saves each message (?P<delay>\d+) seconds after it arrives)"
)
def dispatcher_saving(world: World, instance: str, how: str, delay: str | None) -> None:
    mode = "stopped" if how.startswith("stops") else "running"
    world.run(c.SetDispatcherSaving(world.at(), world.instance(instance), mode, float(delay or 0)))


@both(r'the network loses message (?P<sequence>\d+) of dialog "(?P<dialog>[^"]+)"')
def lose(world: World, sequence: str, dialog: str) -> None:
    world.run(c.LoseInTransit(world.at(), dialog, int(sequence)))


@both(r"the connection from " + INSTANCE + r' to "(?P<address>[^"]+)" drops')
def connection_drops(world: World, instance: str, address: str) -> None:
    world.run(c.DropConnection(world.at(), world.instance(instance), address))


@both(r'the transmission of dialog "(?P<dialog>[^"]+)" fails (?P<why>for lack of memory|security validation)')
def transmission_fails(world: World, dialog: str, why: str) -> None:
    world.run(c.FailTransmission(world.at(), dialog, "resource" if why.endswith("memory") else "security"))


@both(r"CREATE MASTER KEY in " + DB_OF)
def master_key(world: World, database: str, instance: str) -> None:
    world.run(c.CreateMasterKey(world.at(), world.instance(instance), database))


@both(r"the acknowledged-message clean-up of " + DB_OF + " stops")
def cleanup_stops(world: World, database: str, instance: str) -> None:
    world.run(c.StopAckCleanup(world.at(), world.instance(instance), database))


def _rows(world: World, view: str, instance: str) -> list[dict[str, object]]:
    return list(world.run(c.QueryView(world.at(), view, world.instance(instance))).get("rows", []))


@then(parsers.re(INSTANCE + r' has (?P<no>a|no) connection to "(?P<address>[^"]+)"'))
def has_connection(world: World, instance: str, no: str, address: str) -> None:
    rows = [r for r in _rows(world, "sys.dm_broker_connections", instance) if str(r["address"]) == address.upper()]
    assert len(rows) == (1 if no == "a" else 0), f"connections of {instance}: {rows}\nlog:\n{world.log_text()}"


VIEW_COUNTS = {
    "the dispatcher of": "sbtck.dispatcher_buffers",
    "the forwarder of": "sbtck.forwarder",
    "the transmission queue of": "sys.transmission_queue",
}


@then(
    parsers.re(
        r"(?P<what>the dispatcher of|the forwarder of|the transmission queue of) "
        + INSTANCE
        + r" holds (?P<count>no|\d+) messages?"
    )
)
def holds(world: World, what: str, instance: str, count: str) -> None:
    rows = _rows(world, VIEW_COUNTS[what], instance)
    want = 0 if count == "no" else int(count)
    assert len(rows) == want, f"{what} {instance}: expected {want} message(s), got {rows}\nlog:\n{world.log_text()}"


@then(parsers.re(INSTANCE + r" has (?P<count>\d+) running task handlers"))
def running_handlers(world: World, instance: str, count: str) -> None:
    rows = _rows(world, "sbtck.periodic_state", instance)
    assert rows, f"no periodic state for {instance}"
    got = rows[0]["running_task_handlers"]
    assert got == int(count), f"{instance}: expected {count} running task handlers, got {got}"
