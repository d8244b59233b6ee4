"""CREATE / ALTER / DROP ROUTE, message forwarding, and the faults routing scenarios need."""

from __future__ import annotations

from typing import TypeVar

from sbtck import topology as declared
from sbtck.engine.context import Context
from sbtck.engine.model import Instance, Route
from sbtck.engine.router import Router
from sbtck.engine.topology import route as make_route
from sbtck.errors import RouteAdminError
from sbtck.observations import Kind

_Option = TypeVar("_Option", str, str | None)


class RouteAdmin:
    def __init__(self, ctx: Context, router: Router) -> None:
        self.instances = ctx.instances
        self.router = router
        self.clock = ctx.clock
        self.log = ctx.log

    def _instance(self, name: str) -> Instance:
        if name not in self.instances:
            raise RouteAdminError(f"no instance {name!r}")
        return self.instances[name]

    def table(self, instance: str, database: str | None) -> dict[str, Route]:
        """``database`` None means msdb."""
        inst = self._instance(instance)
        if database is None:
            return inst.msdb_routes
        if database not in inst.databases:
            raise RouteAdminError(f"no database {database!r} in instance {instance!r}")
        return inst.databases[database].routes

    def _check_addresses(self, route: Route) -> None:
        for address in (route.address, route.mirror_address):
            if address and address.upper().startswith("TCP://") and self.router.by_address(address) is None:
                raise RouteAdminError(f"route {route.name}: {address} names no instance of the topology")
        if route.mirror_address and not route.address.upper().startswith("TCP://"):
            raise RouteAdminError(f"route {route.name}: a MIRROR_ADDRESS needs a network ADDRESS")

    def create(self, instance: str, database: str | None, spec: declared.Route) -> None:
        table = self.table(instance, database)
        route = make_route(spec, self.clock.now_ms)
        if route.name in table:
            raise RouteAdminError(f"route {route.name!r} already exists in {database or 'msdb'} of {instance}")
        self._check_addresses(route)
        table[route.name] = route
        self.router.route_changed(instance, route.service_name)
        self.log.add(
            {
                "instance": instance,
                "database": database or "msdb",
                "route": route.name,
                "at_ms": self.clock.now_ms,
                "kind": Kind.ROUTE_CREATED,
            }
        )

    def alter(self, instance: str, database: str | None, spec: declared.RouteChange) -> None:
        table = self.table(instance, database)
        if spec.name not in table:
            raise RouteAdminError(f"no route {spec.name!r} in {database or 'msdb'} of {instance}")
        old = table[spec.name]
        merged = declared.Route(
            spec.name,
            _altered(spec.service_name, old.service_name),
            _altered(spec.broker_instance, old.broker_instance),
            _altered(spec.address, old.address),
            _altered(spec.mirror_address, old.mirror_address),
            spec.lifetime_s,
        )
        route = make_route(merged, self.clock.now_ms)
        if spec.lifetime_s is None:
            route.expires_ms = old.expires_ms
        self._check_addresses(route)
        before = table[route.name].service_name
        table[route.name] = route
        self.router.route_changed(instance, before, route.service_name)
        self.log.add(
            {
                "instance": instance,
                "database": database or "msdb",
                "route": route.name,
                "at_ms": self.clock.now_ms,
                "kind": Kind.ROUTE_ALTERED,
            }
        )

    def drop(self, instance: str, database: str | None, name: str) -> None:
        table = self.table(instance, database)
        if name not in table:
            raise RouteAdminError(f"no route {name!r} in {database or 'msdb'} of {instance}")
        dropped = table.pop(name)
        self.router.route_changed(instance, dropped.service_name)
        self.log.add(
            {
                "instance": instance,
                "database": database or "msdb",
                "route": name,
                "at_ms": self.clock.now_ms,
                "kind": Kind.ROUTE_DROPPED,
            }
        )

    def answer_routing_request(self, instance: str, database: str | None, spec: declared.Route) -> None:
        """The dynamic routing service answers by creating the route it found (RTM-4)."""
        self.create(instance, database, spec)
        key = f"{instance}/{database + '.sys.routes' if database else 'msdb.sys.routes'}"
        pending = self.router.requests.get(key, set())
        for request in [r for r in pending if r[1] == spec.service_name]:
            pending.discard(request)

    def set_forwarding(self, instance: str, active: bool) -> None:
        self._instance(instance).forwarding = active
        self.log.add(
            {"instance": instance, "active": active, "at_ms": self.clock.now_ms, "kind": Kind.MESSAGE_FORWARDING}
        )

    def set_reachable(self, instance: str, reachable: bool) -> None:
        self._instance(instance).reachable = reachable
        self.log.add(
            {
                "instance": instance,
                "at_ms": self.clock.now_ms,
                "kind": Kind.INSTANCE_REACHABLE if reachable else Kind.INSTANCE_UNREACHABLE,
            }
        )

    def make_principal(self, instance: str, database: str) -> None:
        """Failover: this copy becomes the principal and its partner, wherever it is, the mirror."""
        inst = self._instance(instance)
        if database not in inst.databases or inst.databases[database].mirroring_role is None:
            raise RouteAdminError(f"database {database!r} of {instance} is not part of a mirroring pair")
        db = inst.databases[database]
        for other in self.instances.values():
            for copy in other.databases.values():
                if copy.broker_instance == db.broker_instance and copy is not db:
                    copy.mirroring_role = "mirror"
        db.mirroring_role = "principal"
        self.log.add(
            {"instance": instance, "database": database, "at_ms": self.clock.now_ms, "kind": Kind.MIRRORING_FAILOVER}
        )


def _altered(option: _Option | None, old: _Option) -> _Option:
    """ALTER ROUTE's option, or the route's own where the statement leaves it out."""
    return old if option is None else option
