"""A small topology and broker for the engine's own tests."""

from __future__ import annotations

from sbtck.contract import QueueRef
from sbtck.engine import Broker
from sbtck.fixtures import topology

TEXT = """\
instances:
  sql1:
    databases:
      shop:
        procedures:
          slow: {receive_top: 1, waitfor_s: 7, work_s: 3}
          quick: {receive_top: 2, waitfor_s: 1}
        queues:
          InitiatorQueue: {}
          Manual: {}
          Busy:
            activation: {status: ON, procedure_name: slow, max_queue_readers: 2}
          Quick:
            activation: {status: ON, procedure_name: quick, max_queue_readers: 3}
        services:
          Initiator: {queue: InitiatorQueue}
          ManualService: {queue: Manual}
          BusyService: {queue: Busy}
          QuickService: {queue: Quick}
"""
SERVICES = ("ManualService", "BusyService", "QuickService")


def key(queue: str) -> QueueRef:
    return QueueRef("sql1", "shop", queue)


def broker(broker_class: type[Broker] = Broker) -> Broker:
    return broker_class(topology.parse(TEXT, "engine test").plain, 0)
