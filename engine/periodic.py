"""The broker's periodic tasks: what runs on every, every 2nd and every 5th timer notification.

The SQL engine's timer notifies the broker every 5 seconds from start; the
broker counts the notifications (PER-0) and each task runs on its own
multiple. Every timer notification is logged with its number and the tasks
it ran, so a scenario can ask what happened at which notification.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sbtck.engine.activation import TIMER
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.events import EventLog
from sbtck.engine.model import Instance
from sbtck.engine.params import EngineParams

if TYPE_CHECKING:
    from sbtck.engine.broker import Broker

# Each task and the notifications it runs on: every, every 2nd, every 5th. In this order they run.
SCHEDULE: dict[str, int] = {
    "queue monitors": 1,  # PER-1A
    "task handlers": 1,  # PER-1B
    "message dispatcher": 1,  # PER-1C
    "transport connections": 2,  # PER-2A
    "transmitter": 2,  # PER-2B
    "idle connections": 5,  # PER-5A
    "forwarder": 5,  # PER-5B
    "broker start": 5,  # PER-5C
    "broker configuration notification": 5,  # PER-5D
    "acknowledged message clean-up": 5,  # PER-5E
}


def tasks_of(number: int, schedule: dict[str, int] = SCHEDULE) -> list[str]:
    return [task for task, every in schedule.items() if number % every == 0]


@dataclass
class DatabaseBroker:
    """A database's broker as the periodic tasks see it."""

    master_key: bool = True
    started: bool = True
    ack_cleanup_running: bool = True


@dataclass
class InstanceTasks:
    task_handlers: int
    failed_handlers: int = 0
    databases: dict[str, DatabaseBroker] = field(default_factory=dict)


class Maintenance:
    """Task handlers (PER-1B), broker start (PER-5C), BCN (PER-5D) and the ack clean-up (PER-5E)."""

    def __init__(
        self,
        instances: dict[str, Instance],
        clock: Clockwork,
        log: EventLog,
        params: EngineParams,
        cpus: dict[str, int],
        master_keys: dict[tuple[str, str], bool],
        has_dialogs: Callable[[str, str], bool],
    ) -> None:
        self.clock = clock
        self.log = log
        self.has_dialogs = has_dialogs
        self.state: dict[str, InstanceTasks] = {}
        for name, instance in instances.items():
            tasks = InstanceTasks(int(params.task_handlers_per_cpu * cpus.get(name, 1)))
            self.state[name] = tasks
            log.emit(clock.now_ms, "task_handlers_started", instance=name, count=tasks.task_handlers)
            for db in instance.databases:
                broker = DatabaseBroker(master_key=master_keys.get((name, db), True))
                tasks.databases[db] = broker
                self._start(name, db, broker, retry=False)

    def _start(self, instance: str, database: str, broker: DatabaseBroker, *, retry: bool) -> None:
        broker.started = broker.master_key
        if broker.started:
            if retry:
                self.log.emit(self.clock.now_ms, "database_broker_started", instance=instance, database=database)
        else:
            self.log.emit(
                self.clock.now_ms,
                "database_broker_start_failed",
                instance=instance,
                database=database,
                reason="missing master key",
            )

    def running(self, instance: str, database: str) -> bool:
        return self.state[instance].databases[database].started

    # --------------------------------------------------------------- faults
    def fail_handlers(self, instance: str, count: int) -> None:
        tasks = self.state[instance]
        running = tasks.task_handlers - tasks.failed_handlers
        if count > running:
            raise ValueError(f"instance {instance!r} has {running} running task handlers, so {count} cannot fail")
        tasks.failed_handlers += count
        self.log.emit(self.clock.now_ms, "task_handlers_failed", instance=instance, count=count)

    def create_master_key(self, instance: str, database: str) -> None:
        self.state[instance].databases[database].master_key = True
        self.log.emit(self.clock.now_ms, "master_key_created", instance=instance, database=database)

    def stop_ack_cleanup(self, instance: str, database: str) -> None:
        self.state[instance].databases[database].ack_cleanup_running = False
        self.log.emit(self.clock.now_ms, "ack_cleanup_stopped", instance=instance, database=database)

    # ---------------------------------------------------------------- tasks
    def restart_handlers(self, instance: str) -> None:
        """PER-1B: every notification, handlers that failed to start are started again."""
        tasks = self.state[instance]
        if tasks.failed_handlers:
            self.log.emit(self.clock.now_ms, "task_handlers_restarted", instance=instance, count=tasks.failed_handlers)
            tasks.failed_handlers = 0

    def restart_brokers(self, instance: str) -> None:
        """PER-5C: databases whose broker failed to start try again."""
        for name, broker in self.state[instance].databases.items():
            if not broker.started:
                self._start(instance, name, broker, retry=True)

    def notify_configuration(self, instance: str) -> None:
        """PER-5D: the Broker Configuration Notification for BCN clients."""
        self.log.emit(self.clock.now_ms, "broker_configuration_notification", instance=instance)

    def resume_ack_cleanup(self, instance: str) -> None:
        """PER-5E: for databases with dialogs, the clean-up of acknowledged messages runs again."""
        for name, broker in self.state[instance].databases.items():
            if broker.started and not broker.ack_cleanup_running and self.has_dialogs(instance, name):
                broker.ack_cleanup_running = True
                self.log.emit(self.clock.now_ms, "ack_cleanup_resumed", instance=instance, database=name)

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "instance": name,
                "task_handlers": t.task_handlers,
                "running_task_handlers": t.task_handlers - t.failed_handlers,
                "database": db,
                "broker_started": b.started,
                "ack_cleanup_running": b.ack_cleanup_running,
            }
            for name, t in self.state.items()
            for db, b in t.databases.items()
        ]


def run_task(broker: Broker, task: str) -> None:
    """One task of SCHEDULE, for every instance."""
    names = list(broker.instances)
    if task == "queue monitors":
        for key in list(broker.monitors.monitors):
            broker.monitors.evaluate(broker.queues[key], TIMER)
    elif task == "task handlers":
        for name in names:
            broker.maintenance.restart_handlers(name)
    elif task == "message dispatcher":
        for name in names:
            broker.dispatchers[name].sweep()
    elif task == "transport connections":
        broker.router.connect_and_send()
    elif task == "transmitter":
        for name in names:
            broker.router.reclassify(name)
    elif task == "idle connections":
        broker.transport.close_idle()
    elif task == "forwarder":
        broker.router.forget_stale_forwarded()
    elif task == "broker start":
        for name in names:
            broker.maintenance.restart_brokers(name)
    elif task == "broker configuration notification":
        for name in names:
            broker.maintenance.notify_configuration(name)
    elif task == "acknowledged message clean-up":
        for name in names:
            broker.maintenance.resume_ack_cleanup(name)
