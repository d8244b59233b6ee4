"""Faults and administrative changes that scenarios apply to the broker's surroundings.

Each checks everything before it changes anything, so a refused fault
leaves the broker as it was. Run them through ``Broker.apply``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbtck.engine.dispatcher import RUNNING, STOPPED
from sbtck.errors import FaultError

if TYPE_CHECKING:
    from sbtck.engine.broker import Broker


def set_reachable(broker: Broker, instance: str, reachable: bool) -> None:
    address = broker.instance(instance).address
    broker.routes.set_reachable(instance, reachable)
    if not reachable:
        broker.transport.drop_links_to(address)


def fail_task_handlers(broker: Broker, instance: str, count: int) -> None:
    broker.instance(instance)
    broker.maintenance.fail_handlers(instance, count)


def set_dispatcher_saving(broker: Broker, instance: str, mode: str, delay_s: float) -> None:
    broker.instance(instance)
    if mode not in (RUNNING, STOPPED) or delay_s < 0:
        raise FaultError(f"dispatcher saving is 'running' (after 0 or more seconds) or 'stopped', not {mode!r}")
    broker.dispatchers[instance].set_saving(mode, int(delay_s * 1000))


def lose_in_transit(broker: Broker, dialog: str, sequence: int, from_target: bool) -> None:
    broker._conversation(dialog)
    broker.router.lost.add((dialog, from_target, sequence))


def drop_connection(broker: Broker, instance: str, address: str) -> None:
    link = (broker.instance(instance).name, address.upper())
    if link not in broker.transport.connections:
        raise FaultError(f"{instance} has no connection to {address}")
    broker.transport.disconnect(link, "disconnected")


def fail_transmission(broker: Broker, dialog: str, reason: str) -> None:
    broker._conversation(dialog)
    if reason not in ("resource", "security"):
        raise FaultError(f"a transmission fails for a 'resource' or a 'security' reason, not {reason!r}")
    broker.router.fail_dialog(dialog, reason)


def create_master_key(broker: Broker, instance: str, database: str) -> None:
    broker._database(instance, database)
    broker.maintenance.create_master_key(instance, database)


def stop_ack_cleanup(broker: Broker, instance: str, database: str) -> None:
    broker._database(instance, database)
    broker.maintenance.stop_ack_cleanup(instance, database)
