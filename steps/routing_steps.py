"""Routing steps: route tables, CREATE / ALTER / DROP ROUTE, forwarding, reachability, mirroring."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from sbtck import contract
from sbtck import topology as declared
from sbtck.errors import ScenarioError
from sbtck.fixtures.routes import route_problem
from sbtck.steps import phrases
from sbtck.steps.differs import rows_differ
from sbtck.steps.vocabulary import step_for
from sbtck.steps.world import World

ROUTE_OPTION = re.compile(r"^\s*(SERVICE_NAME|BROKER_INSTANCE|ADDRESS|MIRROR_ADDRESS|LIFETIME)\s*=\s*(.+?)\s*$")
COLUMNS = {"service_name", "broker_instance", "address", "mirror_address", "lifetime_s"}
OPTION_KEYS = {
    "SERVICE_NAME": "service_name",
    "BROKER_INSTANCE": "broker_instance",
    "ADDRESS": "address",
    "MIRROR_ADDRESS": "mirror_address",
    "LIFETIME": "lifetime_s",
}


def _route(world: World, name: str, values: dict[str, str]) -> dict[str, Any]:
    unknown = set(values) - COLUMNS
    if unknown:
        raise ScenarioError(
            f"route {name}: unknown column(s) {', '.join(sorted(unknown))}; use {', '.join(sorted(COLUMNS))}"
        )
    route: dict[str, Any] = {"name": name, **dict.fromkeys(COLUMNS)}
    for key, text in values.items():
        text = text.strip().strip("'")
        if not text or text.upper() == "NULL":
            continue
        if key == "lifetime_s":
            if not re.fullmatch(r"\d+(\.\d+)?", text):
                raise ScenarioError(f"route {name}: LIFETIME {text!r} is not a number of seconds")
            route[key] = float(text)
        elif key == "broker_instance":
            route[key] = world.broker_instance(text)
        else:
            route[key] = text
    return route


def _check(world: World, route: dict[str, Any]) -> None:
    addresses = {i.address.upper() for i in world.started.plain.instances}
    if route.get("address") is None:
        return
    problem = route_problem(route, addresses)
    if problem:
        raise ScenarioError(f"route {route['name']}: {problem[1]}")


@step_for(phrases.ROUTES_ARE)
def routes_are(world: World, database: str | None, instance: str, datatable: list[list[str]]) -> None:
    """Replaces the whole table, AutoCreatedLocal included, with the rows given."""
    header, *rows = datatable
    if not header or header[0] != "name":
        raise ScenarioError("a route table starts with a 'name' column")
    routes = [_route(world, row[0], dict(zip(header[1:], row[1:], strict=True))) for row in rows]
    for route in routes:
        _check(world, route)
    at = world.at()
    table = world.route_table(instance, database)
    # the routes the scenario made, not those the view shows: a broker whose view is wrong must not keep old ones
    for name in list(table):
        world.run(contract.DropRoute(at, instance, database, name))
        del table[name]
    for route in routes:
        created = declared.Route(**route)
        world.run(contract.CreateRoute(at, instance, database, created))
        table[created.name] = created
    shown = sorted(
        str(row.get("name")) for row in world.run(contract.QueryView(at, "sys.routes", instance, database))["rows"]
    )
    if shown != sorted(table):  # the routes by name, as the scenario made them
        raise rows_differ(
            f"sys.routes of {database or 'msdb'} on {instance} (the routes just set)",
            ["name"],
            [[name] for name in sorted(table)],
            [[name] for name in shown],
        )


def _options(world: World, name: str, options: str) -> dict[str, Any]:
    values: dict[str, str] = {}
    for option in re.split(r",\s*(?=[A-Z_]+\s*=)", options):
        match = ROUTE_OPTION.match(option)
        if match is None:
            raise ScenarioError(
                f"cannot read route option {option.strip()!r}: use SERVICE_NAME = '...', "
                "BROKER_INSTANCE = '...', ADDRESS = '...', MIRROR_ADDRESS = '...', LIFETIME = seconds"
            )
        values[OPTION_KEYS[match.group(1)]] = match.group(2)
    return _route(world, name, values)


def _route_ddl(op: dict[str, Any], verb: str) -> dict[str, Any]:
    """A CREATE or ALTER ROUTE command as ROUTE_DDL says it."""
    route = op["route"]
    words = [
        f"{option} = '{route[key]}'"
        for key, option in (
            ("service_name", "SERVICE_NAME"),
            ("broker_instance", "BROKER_INSTANCE"),
            ("address", "ADDRESS"),
            ("mirror_address", "MIRROR_ADDRESS"),
        )
        if route.get(key) is not None
    ]
    if route.get("lifetime_s") is not None:
        words.append(f"LIFETIME = {route['lifetime_s']:g}")
    options = ", ".join(words)
    return {
        "database": op["database"],
        "instance": op["instance"],
        "verb": verb,
        "name": route["name"],
        "options": options,
    }


@step_for(
    phrases.ROUTE_DDL,
    says=[
        (contract.CreateRoute, lambda op, _: _route_ddl(op, "CREATE")),
        (contract.AlterRoute, lambda op, _: _route_ddl(op, "ALTER")),
    ],
)
def route_ddl(world: World, database: str | None, instance: str, verb: str, name: str, options: str) -> None:
    route = _options(world, name, options)
    at = world.at()
    table = world.route_table(instance, database)
    if verb == "CREATE":
        _check(world, route)
        table[name] = declared.Route(**route)
        world.run(contract.CreateRoute(at, instance, database, table[name]))
    else:
        world.run(contract.AlterRoute(at, instance, database, declared.RouteChange(**route)))
        table[name] = msgspec.structs.replace(table[name], **{k: v for k, v in route.items() if v is not None})


@step_for(
    phrases.DROP_ROUTE,
    says=(
        contract.DropRoute,
        lambda op, _: {"database": op["database"], "instance": op["instance"], "name": op["name"]},
    ),
)
def drop_route(world: World, database: str | None, instance: str, name: str) -> None:
    table = world.route_table(instance, database)
    world.run(contract.DropRoute(world.at(), instance, database, name))
    table.pop(name, None)


@step_for(
    phrases.ANSWER_ROUTING_REQUEST,
    says=(
        contract.AnswerRoutingRequest,
        lambda op, _: {
            "service": op["route"]["service_name"],
            "database": op["database"],
            "instance": op["instance"],
            "address": op["route"]["address"],
        },
    ),
)
def answer_request(world: World, service: str, database: str | None, instance: str, address: str) -> None:
    route = _route(world, f"Dynamic_{service}", {"service_name": service, "address": address})
    _check(world, route)
    created = declared.Route(**route)
    world.run(contract.AnswerRoutingRequest(world.at(), instance, database, created))
    world.route_table(instance, database)[created.name] = created


@step_for(
    phrases.FORWARDING,
    says=(
        contract.SetMessageForwarding,
        lambda op, _: {"instance": op["instance"], "state": "enabled" if op["active"] else "disabled"},
    ),
)
def forwarding(world: World, state: str, instance: str) -> None:
    world.run(contract.SetMessageForwarding(world.at(), world.instance(instance), state == "enabled"))


@step_for(
    phrases.REACHABLE,
    says=(
        contract.SetReachable,
        lambda op, _: {
            "instance": op["instance"],
            "state": "can be reached again" if op["reachable"] else "cannot be reached",
        },
    ),
)
def reachable(world: World, instance: str, state: str) -> None:
    world.run(contract.SetReachable(world.at(), world.instance(instance), state == "can be reached again"))


@step_for(
    phrases.FAILOVER, says=(contract.Failover, lambda op, _: {"database": op["database"], "instance": op["instance"]})
)
def failover(world: World, database: str, instance: str) -> None:
    world.run(contract.Failover(world.at(), world.instance(instance), database))


@step_for(phrases.REPLY, says=(contract.Send, lambda op, _: {"dialog": op["dialog"]} if op["from_target"] else None))
def reply(world: World, dialog: str, count: str | None) -> None:
    for _ in range(int(count or 1)):
        world.run(contract.Send(world.at(), dialog, from_target=True))
