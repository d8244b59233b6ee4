"""Administration and faults that scenarios apply to the broker and its surroundings, as commands.

ALTER/CREATE/DROP ROUTE, forwarding and failover are what an administrator
does; the rest are faults of the world around the broker (an instance out of
reach, task handlers that fail, a connection dropped). Each checks
everything before it changes anything, so a refused one leaves the broker as
it was. Like every command they take the time first (see ``command``).
"""

from __future__ import annotations

from typing import Protocol

from sbtck import topology as declared
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.compiling import mypyc_attr, trait
from sbtck.engine.context import command
from sbtck.engine.dispatcher import RUNNING, STOPPED, Dispatcher
from sbtck.engine.model import Conversation, Database, Instance
from sbtck.engine.periodic import Maintenance
from sbtck.engine.route_admin import RouteAdmin
from sbtck.engine.router import Router
from sbtck.engine.transport import Transport
from sbtck.errors import FaultError


class _Broker(Protocol):
    """What administration and faults need of the Broker they are part of."""

    routes: RouteAdmin
    router: Router
    transport: Transport
    maintenance: Maintenance
    dispatchers: dict[str, Dispatcher]
    clock: Clockwork

    def advance(self, at_ms: int) -> None: ...
    def instance(self, name: str) -> Instance: ...
    def database(self, instance: str, database: str) -> Database: ...
    def conversation(self, dialog: str) -> Conversation: ...


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Administration:
    """A part of the Broker (mypy's self-type mixin), as ``QueueStatements`` is."""

    # ---------------------------------------------------------------- routes
    @command
    def create_route(self: _Broker, instance: str, database: str | None, route: declared.Route) -> None:
        self.routes.create(instance, database, route)

    @command
    def alter_route(self: _Broker, instance: str, database: str | None, route: declared.RouteChange) -> None:
        self.routes.alter(instance, database, route)

    @command
    def drop_route(self: _Broker, instance: str, database: str | None, name: str) -> None:
        self.routes.drop(instance, database, name)

    @command
    def answer_routing_request(self: _Broker, instance: str, database: str | None, route: declared.Route) -> None:
        self.routes.answer_routing_request(instance, database, route)

    @command
    def set_message_forwarding(self: _Broker, instance: str, active: bool) -> None:
        self.routes.set_forwarding(instance, active)

    @command
    def failover(self: _Broker, instance: str, database: str) -> None:
        self.routes.make_principal(instance, database)

    # ---------------------------------------------------------------- faults
    @command
    def set_reachable(self: _Broker, instance: str, reachable: bool) -> None:
        address = self.instance(instance).address
        self.routes.set_reachable(instance, reachable)
        if not reachable:
            self.transport.drop_links_to(address)

    @command
    def fail_task_handlers(self: _Broker, instance: str, count: int) -> None:
        self.instance(instance)
        self.maintenance.fail_handlers(instance, count)

    @command
    def set_dispatcher_saving(self: _Broker, instance: str, mode: str, delay_s: float) -> None:
        self.instance(instance)
        if mode not in (RUNNING, STOPPED) or delay_s < 0:
            raise FaultError(f"dispatcher saving is 'running' (after 0 or more seconds) or 'stopped', not {mode!r}")
        self.dispatchers[instance].set_saving(mode, round(delay_s * 1000))

    @command
    def lose_in_transit(self: _Broker, dialog: str, sequence: int, from_target: bool, every: bool = False) -> None:
        self.conversation(dialog)
        self.router.lost[(dialog, from_target, sequence)] = every

    @command
    def drop_connection(self: _Broker, instance: str, address: str) -> None:
        link = (self.instance(instance).name, address.upper())
        if link not in self.transport.connections:
            raise FaultError(f"{instance} has no connection to {address}")
        self.transport.disconnect(link, "disconnected")

    @command
    def fail_transmission(self: _Broker, dialog: str, reason: str) -> None:
        conv = self.conversation(dialog)
        if reason not in ("resource", "security"):
            raise FaultError(f"a transmission fails for a 'resource' or a 'security' reason, not {reason!r}")
        ends = [conv.initiator.instance] + ([conv.target.instance] if conv.target else [])
        self.router.fail_dialog(dialog, reason, ends)

    @command
    def create_master_key(self: _Broker, instance: str, database: str) -> None:
        self.database(instance, database)
        self.maintenance.create_master_key(instance, database)

    @command
    def stop_ack_cleanup(self: _Broker, instance: str, database: str) -> None:
        self.database(instance, database)
        self.maintenance.stop_ack_cleanup(instance, database)
