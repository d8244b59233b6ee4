"""The broker's periodic tasks: what runs on every, every 2nd and every 5th timer notification.

The SQL engine's timer notifies the broker every 5 seconds from start; the
broker counts the notifications (PER-0) and each task runs on its own
multiple. Every timer notification is logged with its number and the tasks
it ran, so a scenario can ask what happened at which notification.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from sbtck.engine.activation import QueueMonitors
from sbtck.engine.choosing import (
    ANY_WITH_DIALOGS,
    CLEANUP_READING,
    STARTED_BROKERS,
    TASK_HANDLERS,
    Chooser,
    FirstChooser,
    Reading,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.dispatcher import Dispatcher
from sbtck.engine.model import Database
from sbtck.engine.router import Router
from sbtck.engine.transport import Transport
from sbtck.errors import FaultError
from sbtck.observations import Kind


class Parts(Protocol):
    """What the periodic tasks act on (the broker has them all)."""

    monitors: QueueMonitors
    maintenance: Maintenance
    dispatchers: dict[str, Dispatcher]
    router: Router
    transport: Transport


@dataclass
class InstanceTasks:
    task_handlers: int
    failed_handlers: int = 0


@mypyc_attr(allow_interpreted_subclasses=True)
class Maintenance:
    """Task handlers (PER-1B), broker start (PER-5C), BCN (PER-5D) and the ack clean-up (PER-5E).

    A database's broker state (master key, started, clean-up running) lives on
    the database itself, where delivery reads it; this part only changes it.
    """

    def __init__(self, ctx: Context, has_dialogs: Callable[[str, str], bool], chooser: Chooser | None = None) -> None:
        self.instances = ctx.instances
        self.chooser: Chooser = chooser or FirstChooser()
        self.cleanup_reading = Reading(CLEANUP_READING, STARTED_BROKERS, ANY_WITH_DIALOGS)
        self.clock = ctx.clock
        self.log = ctx.log
        self.has_dialogs = has_dialogs
        self.state: dict[str, InstanceTasks] = {}
        for name, instance in ctx.instances.items():
            most = int(ctx.params.task_handlers_per_cpu * instance.cpus)
            self.chooser.about(name, {TASK_HANDLERS: True, "at_ms": self.clock.now_ms})
            count = self.chooser.choose(TASK_HANDLERS, [str(n) for n in range(most, 0, -1)])
            tasks = InstanceTasks(int(count))
            self.state[name] = tasks
            self.log.add(
                {
                    "instance": name,
                    "count": tasks.task_handlers,
                    "at_ms": self.clock.now_ms,
                    "kind": Kind.TASK_HANDLERS_STARTED,
                }
            )
            for db in instance.databases.values():
                self._start(name, db, retry=False)

    def _start(self, instance: str, db: Database, *, retry: bool) -> None:
        db.broker_started = db.master_key
        if db.broker_started:
            if retry:
                self.log.add(
                    {
                        "instance": instance,
                        "database": db.name,
                        "at_ms": self.clock.now_ms,
                        "kind": Kind.DATABASE_BROKER_STARTED,
                    }
                )
        else:
            self.log.add(
                {
                    "instance": instance,
                    "database": db.name,
                    "reason": "missing master key",
                    "at_ms": self.clock.now_ms,
                    "kind": Kind.DATABASE_BROKER_START_FAILED,
                }
            )

    # --------------------------------------------------------------- faults
    def fail_handlers(self, instance: str, count: int) -> None:
        tasks = self.state[instance]
        running = tasks.task_handlers - tasks.failed_handlers
        if count > running:
            raise FaultError(f"instance {instance!r} has {running} running task handlers, so {count} cannot fail")
        tasks.failed_handlers += count
        self.log.add(
            {"instance": instance, "count": count, "at_ms": self.clock.now_ms, "kind": Kind.TASK_HANDLERS_FAILED}
        )

    def create_master_key(self, instance: str, database: str) -> None:
        self.instances[instance].databases[database].master_key = True
        self.log.add(
            {"instance": instance, "database": database, "at_ms": self.clock.now_ms, "kind": Kind.MASTER_KEY_CREATED}
        )

    def stop_ack_cleanup(self, instance: str, database: str) -> None:
        self.instances[instance].databases[database].ack_cleanup_running = False
        self.log.add(
            {"instance": instance, "database": database, "at_ms": self.clock.now_ms, "kind": Kind.ACK_CLEANUP_STOPPED}
        )

    # ---------------------------------------------------------------- tasks
    def restart_handlers(self, instance: str) -> None:
        """PER-1B: every notification, handlers that failed to start are started again."""
        tasks = self.state[instance]
        if tasks.failed_handlers:
            self.log.add(
                {
                    "instance": instance,
                    "count": tasks.failed_handlers,
                    "at_ms": self.clock.now_ms,
                    "kind": Kind.TASK_HANDLERS_RESTARTED,
                }
            )
            tasks.failed_handlers = 0

    def restart_brokers(self, instance: str) -> None:
        """PER-5C: databases whose broker failed to start try again."""
        for db in self.instances[instance].databases.values():
            if not db.broker_started:
                self._start(instance, db, retry=True)

    def notify_configuration(self, instance: str) -> None:
        """PER-5D: the Broker Configuration Notification for BCN clients."""
        self.log.add({"instance": instance, "at_ms": self.clock.now_ms, "kind": Kind.BROKER_CONFIGURATION_NOTIFICATION})

    def resume_ack_cleanup(self, instance: str) -> None:
        """PER-5E: for databases with dialogs, the clean-up of acknowledged messages runs again."""
        for db in self.instances[instance].databases.values():
            if db.ack_cleanup_running or not self.has_dialogs(instance, db.name):
                continue
            if db.broker_started or self.cleanup_reading.of(self.chooser) == ANY_WITH_DIALOGS:
                db.ack_cleanup_running = True
                self.log.add(
                    {
                        "instance": instance,
                        "database": db.name,
                        "at_ms": self.clock.now_ms,
                        "kind": Kind.ACK_CLEANUP_RESUMED,
                    }
                )

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "instance": name,
                "task_handlers": t.task_handlers,
                "running_task_handlers": t.task_handlers - t.failed_handlers,
                "database": db.name,
                "broker_started": db.broker_started,
                "ack_cleanup_running": db.ack_cleanup_running,
            }
            for name, t in self.state.items()
            for db in self.instances[name].databases.values()
        ]


# ------------------------------------------------------------------ the tasks, one function each


# Each runs for the instance ONLY names, or for every instance (None): TIMER_ORDER runs an instant's tasks task by
# task across the instances, or instance by instance.


def _instances(parts: Parts, only: str | None) -> list[str]:
    return list(parts.maintenance.state) if only is None else [only]


def queue_monitors(parts: Parts, only: str | None) -> None:
    """PER-1A: every queue monitor looks at its queue."""
    parts.monitors.on_timer(only)


def task_handlers(parts: Parts, only: str | None) -> None:
    """PER-1B: task handlers that failed to start are started again."""
    for name in _instances(parts, only):
        parts.maintenance.restart_handlers(name)


def message_dispatcher(parts: Parts, only: str | None) -> None:
    """PER-1C: each instance's dispatcher sweeps its buffers."""
    for name in _instances(parts, only):
        parts.dispatchers[name].sweep()


def transport_connections(parts: Parts, only: str | None) -> None:
    """PER-2A: connect where messages wait for a connection, and send."""
    parts.router.connect_and_send(only)


def transmitter(parts: Parts, only: str | None) -> None:
    """PER-2B: messages waiting in the transmission queue are classified again."""
    for name in _instances(parts, only):
        parts.router.reclassify(name)


def idle_connections(parts: Parts, only: str | None) -> None:
    """PER-5A: connections idle for too long are closed."""
    parts.transport.close_idle(only)


def forwarder(parts: Parts, only: str | None) -> None:
    """PER-5B: forwarded messages kept too long in memory are dropped."""
    parts.router.forget_stale_forwarded(only)


def broker_start(parts: Parts, only: str | None) -> None:
    """PER-5C: databases whose broker failed to start try again."""
    for name in _instances(parts, only):
        parts.maintenance.restart_brokers(name)


def broker_configuration_notification(parts: Parts, only: str | None) -> None:
    """PER-5D: the Broker Configuration Notification goes to BCN clients."""
    for name in _instances(parts, only):
        parts.maintenance.notify_configuration(name)


def acknowledged_message_cleanup(parts: Parts, only: str | None) -> None:
    """PER-5E: the clean-up of acknowledged messages runs again where it stopped."""
    for name in _instances(parts, only):
        parts.maintenance.resume_ack_cleanup(name)


@dataclass(frozen=True)
class Task:
    """A periodic task: its name as timer notifications list it, the notifications it runs on, its rule."""

    name: str
    every: int
    rule: str
    run: Callable[[Parts, str | None], None]


# In this order they run on a notification that is a multiple of ``every``.
SCHEDULE: tuple[Task, ...] = (
    Task("queue monitors", 1, "PER-1A", queue_monitors),
    Task("task handlers", 1, "PER-1B", task_handlers),
    Task("message dispatcher", 1, "PER-1C", message_dispatcher),
    Task("transport connections", 2, "PER-2A", transport_connections),
    Task("transmitter", 2, "PER-2B", transmitter),
    Task("idle connections", 5, "PER-5A", idle_connections),
    Task("forwarder", 5, "PER-5B", forwarder),
    Task("broker start", 5, "PER-5C", broker_start),
    Task("broker configuration notification", 5, "PER-5D", broker_configuration_notification),
    Task("acknowledged message clean-up", 5, "PER-5E", acknowledged_message_cleanup),
)


def tasks_of(number: int, schedule: tuple[Task, ...] = SCHEDULE) -> list[Task]:
    """PER-0: the tasks the ``number``-th timer notification runs."""
    return [task for task in schedule if number % task.every == 0]


def every(schedule: tuple[Task, ...], **changes: int) -> tuple[Task, ...]:
    """The schedule with some tasks on other multiples, by function name (a wrong variant's tool)."""
    return tuple(replace(t, every=changes.get(t.run.__name__, t.every)) for t in schedule)
