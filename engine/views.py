"""The broker's views: rows as SQL Server's DMVs and catalog views would show them."""

from __future__ import annotations

from typing import Any, Protocol

from sbtck.contract import QueueRef
from sbtck.engine.activation import QueueMonitors
from sbtck.engine.dispatcher import Dispatcher
from sbtck.engine.model import Conversation, Queue
from sbtck.engine.periodic import Maintenance
from sbtck.engine.receiving import Receiving
from sbtck.engine.route_admin import RouteAdmin
from sbtck.engine.router import Router
from sbtck.engine.transport import Transport
from sbtck.errors import RouteAdminError, ViewError


class BrokerState(Protocol):
    """What the views read of a broker: the parts the Broker (sbtck/engine/broker.py) holds, which calls them."""

    @property
    def queues(self) -> dict[QueueRef, Queue]: ...
    @property
    def conversations(self) -> dict[str, Conversation]: ...
    @property
    def monitors(self) -> QueueMonitors: ...
    @property
    def receiving(self) -> Receiving: ...
    @property
    def routes(self) -> RouteAdmin: ...
    @property
    def router(self) -> Router: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def dispatchers(self) -> dict[str, Dispatcher]: ...
    @property
    def maintenance(self) -> Maintenance: ...


def dm_broker_queue_monitors(broker: BrokerState) -> list[dict[str, Any]]:
    """ACT-03: one row per active queue monitor of the instance."""
    rows = []
    for key, monitor in broker.monitors.monitors.items():
        queue = broker.queues[key]
        waiting = broker.receiving.tasks_waiting(key)
        running = len(broker.monitors.tasks[key])
        state = (
            "NOTIFIED"
            if monitor.notified_until_ms is not None
            else ("RECEIVES_OCCURRING" if running or waiting else "INACTIVE")
        )
        rows.append(
            {
                "database_id": queue.database_id,
                "queue_id": queue.queue_id,
                **key.fields(),
                "state": state,
                "last_empty_rowset_time": monitor.last_empty_ms,
                "last_activated_time": monitor.last_activated_ms,
                "tasks_waiting": waiting,
            }
        )
    return rows


def sys_routes(broker: BrokerState, instance: str, database: str | None) -> list[dict[str, Any]]:
    try:
        table = broker.routes.table(instance, database)
    except RouteAdminError as exc:
        raise ViewError(str(exc)) from exc
    return [
        {"instance": instance, "database": database or "msdb", **r.row()}
        for r in sorted(table.values(), key=lambda r: r.name)
    ]


def conversation_endpoints(broker: BrokerState) -> list[dict[str, Any]]:
    return [
        {
            "dialog": c.dialog,
            "instance": c.initiator.instance,
            "database": c.initiator.database,
            "far_service": c.target_service,
            "far_broker_instance": c.target_broker_instance,
            "acknowledged": c.acknowledged,
        }
        for c in broker.conversations.values()
    ]


def dm_broker_activated_tasks(broker: BrokerState) -> list[dict[str, Any]]:
    """ACT-11: one row per procedure started by activation and still running."""
    return [
        {
            "spid": task.session.spid,
            "database_id": broker.queues[key].database_id,
            "queue_id": broker.queues[key].queue_id,
            **key.fields(),
            "task": task.ordinal,
            "procedure_name": task.procedure.name,  # what it was started as, whatever ALTER QUEUE named since
        }
        for key, tasks in broker.monitors.tasks.items()
        for task in tasks
    ]


def rows(broker: BrokerState, view: str, instance: str | None, database: str | None) -> list[dict[str, Any]]:
    """One of the contract's views; ``instance`` narrows the instance-wide ones."""

    def mine(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in found if instance in (None, r["instance"])]

    if view == "sys.dm_broker_queue_monitors":
        return dm_broker_queue_monitors(broker)
    if view == "sys.dm_broker_activated_tasks":
        return dm_broker_activated_tasks(broker)
    if view == "sys.routes":
        if instance is None:
            raise ViewError("sys.routes needs an instance (and a database; none means msdb)")
        return sys_routes(broker, instance, database)
    if view == "sys.transmission_queue":
        return mine(broker.router.transmission_rows())
    if view == "sys.conversation_endpoints":
        return conversation_endpoints(broker)
    if view == "sys.dm_broker_connections":
        return mine(broker.transport.rows())
    if view == "sbtck.dispatcher_buffers":
        return mine([r for d in broker.dispatchers.values() for r in d.rows()])
    if view == "sbtck.forwarder":
        return mine(broker.router.transmission_rows(forwarded=True))
    if view == "sbtck.periodic_state":
        return mine(broker.maintenance.rows())
    raise ViewError(f"unknown view {view!r}")
