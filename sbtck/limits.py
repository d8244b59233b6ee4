"""The sizes the kit bounds, each a named limit with the environment variable that moves it.

A topology, the dialogs a scenario begins and the events one command may cause decide the memory of a run: an
inline topology of 200 copies took 5.7 GB, and a day's advance of a large one 3.1 GB in ``sbtck serve`` (issue 47).
Each is checked where it enters the reference engine (``check_topology``, ``sbtck/iut/reference.py``,
``sbtck/engine/events.py``), so that the suite, ``sbtck serve`` on each connection and the workload stage hold the
same limits; one reached is the scenario's error, naming the limit and its variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sbtck.errors import ContractError

if TYPE_CHECKING:
    from sbtck.topology import Topology


@dataclass(frozen=True)
class Limit:
    what: str
    variable: str
    default: int

    @property
    def value(self) -> int:
        try:
            return max(1, int(os.environ.get(self.variable, self.default)))
        except ValueError:
            return self.default

    def exceeded(self, count: int, by: str) -> ContractError:
        return ContractError(
            f"{by} {count} {self.what}; the kit's limit is {self.value} ({self.variable}), which bounds the memory "
            "a scenario may take"
        )


# a topology's elements: the largest of the kit's own is some 5 instances, 12 queues and 20 routes
INSTANCES = Limit("instances", "SBTCK_MAX_INSTANCES", 32)
DATABASES = Limit("databases", "SBTCK_MAX_DATABASES", 128)
QUEUES = Limit("queues", "SBTCK_MAX_QUEUES", 256)
ROUTES = Limit("routes", "SBTCK_MAX_ROUTES", 512)
# the dialogs one scenario may begin, and the events one command may cause (a day of a broker's timers on a
# topology within the limits above is well under it; each event is some hundreds of bytes)
DIALOGS = Limit("dialogs", "SBTCK_MAX_DIALOGS", 10_000)
EVENTS_PER_COMMAND = Limit("events", "SBTCK_MAX_EVENTS_PER_COMMAND", 200_000)
# `sbtck serve --tcp`: the connections served at once, each with its own engine within the limits above
CONNECTIONS = Limit("connections", "SBTCK_SERVE_MAX_CONNECTIONS", 8)


def topology_sizes(topology: Topology) -> dict[Limit, int]:
    """How many of each bounded element a topology declares."""
    instances = topology.instances
    databases = [d for i in instances for d in i.databases]
    routes = sum(len(i.msdb_routes) for i in instances) + sum(len(d.routes) for d in databases)
    return {
        INSTANCES: len(instances),
        DATABASES: len(databases),
        QUEUES: sum(len(d.queues) for d in databases),
        ROUTES: routes,
    }


def check_topology(topology: Topology) -> None:
    """ContractError naming the first limit the topology goes beyond."""
    for limit, count in topology_sizes(topology).items():
        if count > limit.value:
            raise limit.exceeded(count, "the topology declares")
