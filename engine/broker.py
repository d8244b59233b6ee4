"""The broker of a topology: the engine's one entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sbtck import topology as declared
from sbtck.contract import Event, QueueRef
from sbtck.engine import views
from sbtck.engine.activation import QueueMonitors
from sbtck.engine.administration import Administration
from sbtck.engine.choosing import (
    INSTANCE_BY_INSTANCE,
    STALE_SPAN,
    TASK_BY_TASK,
    TIMER_ORDER,
    Chooser,
    FirstChooser,
    Span,
)
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context, command
from sbtck.engine.dialogs import Dialogs
from sbtck.engine.dispatcher import Dispatcher
from sbtck.engine.events import EventLog
from sbtck.engine.model import Conversation, Database, Envelope, Instance, Queue, ReaderBehaviour
from sbtck.engine.params import EngineParams
from sbtck.engine.periodic import SCHEDULE, Maintenance, Task, tasks_of
from sbtck.engine.receiving import Receiving
from sbtck.engine.route_admin import RouteAdmin
from sbtck.engine.router import Router, SendsOnceConnected
from sbtck.engine.statements import QueueStatements
from sbtck.engine.topology import build
from sbtck.engine.transactions import Session
from sbtck.engine.transport import NotifiedTransport, Transport
from sbtck.errors import BrokerError
from sbtck.observations import Kind

FIRST_USER_SPID = 51
T = TypeVar("T")


@mypyc_attr(allow_interpreted_subclasses=True)
class Broker(QueueStatements, Administration):
    """Every public call takes the time it happens at, in epoch milliseconds.

    Before applying a call the broker runs all work that fell due since the
    previous one - timer notifications every ``timer_period_s`` from broker
    start, WAITFOR time-outs, activated procedures finishing their work - in
    time order.
    """

    monitors_class: ClassVar[type[QueueMonitors]] = QueueMonitors
    receiving_class: ClassVar[type[Receiving]] = Receiving
    dialogs_class: ClassVar[type[Dialogs]] = Dialogs
    router_class: ClassVar[type[Router]] = Router
    maintenance_class: ClassVar[type[Maintenance]] = Maintenance
    transport_class: ClassVar[type[Transport]] = Transport
    dispatcher_class: ClassVar[type[Dispatcher]] = Dispatcher
    chooser_class: ClassVar[type[Chooser]] = FirstChooser
    schedule: ClassVar[tuple[Task, ...]] = SCHEDULE

    def __init__(
        self,
        topology: declared.Topology,
        start_ms: int,
        params: EngineParams | None = None,
        chooser: Chooser | None = None,
    ) -> None:
        self.params = params or EngineParams.reference()
        self.start_ms = start_ms
        self.instances: dict[str, Instance] = build(topology, start_ms)
        self.clock = Clockwork(start_ms)
        self.log = EventLog()
        self.log.add({"at_ms": start_ms, "kind": Kind.BROKER_STARTED})
        self.queues: dict[QueueRef, Queue] = {
            q.key: q for i in self.instances.values() for d in i.databases.values() for q in d.queues.values()
        }
        self.sessions: dict[str, Session] = {}
        self.conversations: dict[str, Conversation] = {}
        self._next_spid = FIRST_USER_SPID
        # with resending, the messages that have arrived: a copy of one is not delivered again
        self.arrived: set[tuple[str, bool, int]] = set()
        self._notification = 0
        chooser = chooser or self.chooser_class()
        self.chooser = chooser
        ctx = Context(self.instances, self.queues, self.clock, self.log, self.params, chooser)
        self.monitors = self.monitors_class(ctx, self.procedure, self._new_session)
        self.receiving = self.receiving_class(ctx, self.monitors)
        self.monitors.watch(self.receiving, self._timer_pending)
        self.transport = self.transport_class(ctx)
        self.dispatchers = {
            name: self.dispatcher_class(ctx, inst, self.deliver, self._expected)
            for name, inst in self.instances.items()
        }
        self.transport.chooser = chooser
        staleness = Span(STALE_SPAN)
        for dispatcher in self.dispatchers.values():
            dispatcher.chooser, dispatcher.staleness = chooser, staleness
        self.receiving.transactions.takes_the_oldest = type(chooser) is FirstChooser
        self.router = self.router_class(ctx, self.transport, self)
        self.maintenance = self.maintenance_class(ctx, self._has_dialogs, chooser)
        self.routes = RouteAdmin(ctx, self.router)
        self.dialogs = self.dialogs_class(
            ctx, self.conversations, self.router, self.monitors, self.receiving, self.database
        )
        for queue in self.queues.values():
            self.monitors.sync(queue)
        self._schedule_timer()

    # ------------------------------------------------------------------ time
    def advance(self, at_ms: int) -> None:
        if at_ms < self.clock.now_ms:
            raise BrokerError(
                f"time cannot go back: the broker is at {self.clock.now_ms} ms, the call is at {at_ms} ms"
            )
        self.clock.run_until(at_ms)

    def _next_timer_ms(self) -> int:
        """When the next timer notification falls (PER-0: counted from broker start)."""
        return self.start_ms + (self._notification + 1) * self.params.timer_period_s * 1000

    def _timer_pending(self) -> bool:
        """Is a timer notification due at this instant, not run yet?"""
        return self._next_timer_ms() == self.clock.now_ms

    def _schedule_timer(self) -> None:
        self.clock.at(self._next_timer_ms(), self._timer_notification)

    def _timer_notification(self) -> None:
        """PER-0: the notifications are counted from broker start; each runs the tasks of its number."""
        self._notification += 1
        number, now = self._notification, self.clock.now_ms
        tasks = tasks_of(number, self.schedule)
        names = [task.name for task in tasks]
        for name in self.instances:
            # built whole (EventLog.add), each event with its own list of the tasks
            self.log.add(
                {"instance": name, "number": number, "tasks": names[:], "at_ms": now, "kind": Kind.TIMER_NOTIFICATION}
            )
        if self._instance_by_instance():
            for name in self.instances:
                for task in tasks:
                    task.run(self, name)
        else:
            for task in tasks:
                task.run(self, None)
        self._schedule_timer()

    def _instance_by_instance(self) -> bool:
        """TIMER_ORDER, asked at each notification of several instances where the order can show: one instance's
        tasks reach another's only by sending a message, and they send only what waits in a transmission queue or
        forwarder or is buffered in a dispatcher."""
        if len(self.instances) < 2:
            return False
        if not any(self.router.queue.lines.values()) and not any(
            line for dispatcher in self.dispatchers.values() for line in dispatcher.buffers.values()
        ):
            return False
        self.chooser.about("", {TIMER_ORDER: True, "at_ms": self.clock.now_ms})
        return self.chooser.choose(TIMER_ORDER, [TASK_BY_TASK, INSTANCE_BY_INSTANCE]) == INSTANCE_BY_INSTANCE

    def _expected(self, dialog: str, from_target: bool) -> int:
        return self.conversations[dialog].received[int(from_target)]

    def _has_dialogs(self, instance: str, database: str) -> bool:
        return any(
            (c.initiator.instance, c.initiator.database) == (instance, database)
            or (c.target is not None and (c.target.instance, c.target.database) == (instance, database))
            for c in self.conversations.values()
        )

    # ------------------------------------------------------------- lookups
    def queue(self, key: QueueRef) -> Queue:
        try:
            return self.queues[key]
        except KeyError:
            raise BrokerError(
                f"no queue {key.queue!r} in database {key.database!r} of instance {key.instance!r}"
            ) from None

    def database(self, instance: str, database: str) -> Database:
        try:
            return self.instances[instance].databases[database]
        except KeyError:
            raise BrokerError(f"no database {database!r} in instance {instance!r}") from None

    def procedure(self, key: QueueRef, name: str) -> ReaderBehaviour:
        procedures = self.instances[key.instance].databases[key.database].procedures
        if name not in procedures:
            raise BrokerError(f"no procedure {name!r} is declared in database {key.database!r}")
        return procedures[name]

    def conversation(self, dialog: str) -> Conversation:
        return self.dialogs.conversation(dialog)

    def _new_session(self, name: str) -> Session:
        session = Session(name, self._next_spid)
        self._next_spid += 1
        self.sessions[name] = session
        return session

    def session(self, name: str) -> Session:
        return self.sessions.get(name) or self._new_session(name)

    # ------------------------------------------------------------- commands
    @command
    def advance_time(self) -> None:
        """Nothing but the time passing: what falls due up to it runs."""

    @command
    def begin_dialog(
        self,
        dialog: str,
        instance: str,
        database: str,
        from_service: str,
        to_service: str,
        to_broker_instance: str | None = None,
    ) -> dict[str, Any]:
        self.dialogs.begin(dialog, (instance, database, from_service), to_service, to_broker_instance)
        return {"dialog": dialog}

    # a command (context.command) written out, as RECEIVE is (sbtck/engine/compiling.py)
    def send(
        self, at_ms: int, /, dialog: str, message_type: str = "DEFAULT", body: str = "", from_target: bool = False
    ) -> dict[str, Any]:
        self.advance(at_ms)
        sequence = self.dialogs.send(dialog, message_type, body, from_target)
        self.clock.run_pending()
        return {"message_sequence_number": sequence}

    def dispatch(self, env: Envelope, at: Instance, db: Database) -> None:
        """A message that came over the transport: the receiving instance's dispatcher has it first."""
        self.dispatchers[at.name].receive(env, db)

    def deliver(self, env: Envelope, at: Instance, db: Database) -> None:
        if self.router.resend_first_ms:
            copy = (env.dialog, env.from_target, env.sequence)
            if copy in self.arrived:
                return
            self.arrived.add(copy)
        self.dialogs.deliver(env, at, db)

    # ----------------------------------------------------------- applying
    def apply(self, at_ms: int, action: Callable[[], T]) -> T:
        """Run ``action`` at ``at_ms``: what fell due first, then it, then what it set off at that instant.

        A refusal is a BrokerError, raised before anything changed; any other
        exception is a fault of the engine and goes up as it is, so that a bug
        in the reference is never mistaken for a broker's answer.
        """
        self.advance(at_ms)
        result = action()
        self.clock.run_pending()
        return result

    def instance(self, name: str) -> Instance:
        if name not in self.instances:
            raise BrokerError(f"no instance {name!r}")
        return self.instances[name]

    # ---------------------------------------------------------- observations
    @command
    def query_view(self, view: str, instance: str | None, database: str | None) -> dict[str, Any]:
        return {"rows": views.rows(self, view, instance, database)}

    def drain_events(self) -> list[Event]:
        return self.log.drain()

    def drain_events_json(self) -> list[dict[str, Any]]:
        """The new events as JSON objects, each equal to its ``Event.to_json()``."""
        return self.log.drain_json()


# Two choices about a message waiting for its connection that the documents leave open and no chooser makes: when
# the transport connects (at a SEND or only when notified, PER-2A), and whether the message is matched again once
# its connection opens. The workload stage accepts a trace any of these brokers gives; the reference's pair first.
class ConnectsWhenNotified(Broker):
    transport_class = NotifiedTransport
    router_class = SendsOnceConnected


class ConnectsWhenNotifiedMatchingAgain(Broker):
    transport_class = NotifiedTransport


class SendsWhereRouted(Broker):
    router_class = SendsOnceConnected


CONNECTING_CHOICES: tuple[type[Broker], ...] = (
    Broker,
    ConnectsWhenNotified,
    ConnectsWhenNotifiedMatchingAgain,
    SendsWhereRouted,
)
