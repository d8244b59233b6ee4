"""The broker of a topology: the engine's one entry point."""

from __future__ import annotations

from typing import Any

from engine.activation import ALTER, ARRIVAL, TIMER, QueueMonitors
from engine.choosing import Chooser, FirstChooser
from engine.clockwork import Clockwork
from engine.dispatcher import Dispatcher
from engine.events import Event, EventLog
from engine.model import Conversation, Database, Endpoint, Envelope, Instance, Message, Queue, QueueKey, ReaderBehaviour
from engine.params import EngineParams
from engine.periodic import SCHEDULE, Maintenance, tasks_of
from engine.receiving import GET_CONVERSATION_GROUP, RECEIVE, Receiving, ReceivingError, Session
from engine.route_admin import RouteAdmin, RouteAdminError
from engine.router import Router
from engine.topology import TopologyError, build
from engine.transport import Transport

FIRST_USER_SPID = 51


class BrokerError(ValueError):
    """A command the broker refuses; the message says why."""


class Broker:
    """Every public call takes the time it happens at, in epoch milliseconds.

    Before applying a call the broker runs all work that fell due since the
    previous one - timer notifications every ``timer_period_s`` from broker
    start, WAITFOR time-outs, activated procedures finishing their work - in
    time order.
    """

    monitors_class: type[QueueMonitors] = QueueMonitors
    receiving_class: type[Receiving] = Receiving
    router_class: type[Router] = Router
    maintenance_class: type[Maintenance] = Maintenance
    transport_class: type[Transport] = Transport
    schedule: dict[str, int] = SCHEDULE

    def __init__(
        self,
        topology: dict[str, Any],
        start_ms: int,
        params: EngineParams | None = None,
        chooser: Chooser | None = None,
    ) -> None:
        self.params = params or EngineParams.reference()
        self.start_ms = start_ms
        try:
            self.instances: dict[str, Instance] = build(topology, start_ms)
        except TopologyError as exc:
            raise BrokerError(str(exc)) from exc
        self.clock = Clockwork(start_ms)
        self.log = EventLog()
        self.log.emit(start_ms, "broker_started")
        self.queues: dict[QueueKey, Queue] = {
            q.key: q for i in self.instances.values() for d in i.databases.values() for q in d.queues.values()
        }
        self.sessions: dict[str, Session] = {}
        self.conversations: dict[str, Conversation] = {}
        self._next_spid = FIRST_USER_SPID
        self._queuing_order = 0
        self._notification = 0
        self.monitors = self.monitors_class(
            self.queues, self._procedure, self.clock, self.log, self.params, self._new_session
        )
        self.receiving = self.receiving_class(self.queues, self.clock, self.log, self.monitors)
        self.monitors.receiving = self.receiving
        self.transport = self.transport_class(self.instances, self.clock, self.log, self.params)
        self.dispatchers = {
            name: Dispatcher(inst, self.clock, self.log, self.params, self._deliver, self._expected)
            for name, inst in self.instances.items()
        }
        self.router = self.router_class(
            self.instances,
            self.clock,
            self.log,
            self.params,
            chooser or FirstChooser(),
            self._deliver,
            self.transport,
            lambda env, at, db: self.dispatchers[at.name].receive(env, db),
        )
        self.maintenance = self.maintenance_class(
            self.instances,
            self.clock,
            self.log,
            self.params,
            {i["name"]: int(i.get("cpus", 1)) for i in topology.get("instances", [])},
            {
                (i["name"], d["name"]): bool(d.get("master_key", True))
                for i in topology.get("instances", [])
                for d in i.get("databases", [])
            },
            self._has_dialogs,
        )
        self.routes = RouteAdmin(self.instances, self.router, self.clock, self.log)
        self._sync_database_brokers()
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

    def _schedule_timer(self) -> None:
        period = self.params.timer_period_s * 1000
        self.clock.at(self.start_ms + (self._notification + 1) * period, self._timer_notification)

    def _timer_notification(self) -> None:
        self._notification += 1
        tasks = tasks_of(self._notification, self.schedule)
        for name in self.instances:
            self.log.emit(
                self.clock.now_ms, "timer_notification", instance=name, number=self._notification, tasks=tasks
            )
        for task in tasks:
            self._periodic_task(task)
        self._sync_database_brokers()
        self._schedule_timer()

    def _periodic_task(self, task: str) -> None:
        names = list(self.instances)
        if task == "queue monitors":
            for key in list(self.monitors.monitors):
                self.monitors.evaluate(self.queues[key], TIMER)
        elif task == "task handlers":
            for name in names:
                self.maintenance.restart_handlers(name)
        elif task == "message dispatcher":
            for name in names:
                self.dispatchers[name].sweep()
        elif task == "transport connections":
            self.router.connect_and_send()
        elif task == "transmitter":
            for name in names:
                self.router.reclassify(name)
        elif task == "idle connections":
            self.transport.close_idle()
        elif task == "forwarder":
            self.router.forget_stale_forwarded()
        elif task == "broker start":
            for name in names:
                self.maintenance.restart_brokers(name)
        elif task == "broker configuration notification":
            for name in names:
                self.maintenance.notify_configuration(name)
        elif task == "acknowledged message clean-up":
            for name in names:
                self.maintenance.resume_ack_cleanup(name)

    def _sync_database_brokers(self) -> None:
        for name, instance in self.instances.items():
            for db_name, db in instance.databases.items():
                db.broker_started = self.maintenance.running(name, db_name)

    def _expected(self, dialog: str, from_target: bool) -> int:
        return self.conversations[dialog].received[int(from_target)]

    def _has_dialogs(self, instance: str, database: str) -> bool:
        return any(
            (c.initiator.instance, c.initiator.database) == (instance, database)
            or (c.target is not None and (c.target.instance, c.target.database) == (instance, database))
            for c in self.conversations.values()
        )

    # ------------------------------------------------------------- lookups
    def queue(self, key: QueueKey) -> Queue:
        try:
            return self.queues[key]
        except KeyError:
            raise BrokerError(
                f"no queue {key.queue!r} in database {key.database!r} of instance {key.instance!r}"
            ) from None

    def _database(self, instance: str, database: str) -> Database:
        try:
            return self.instances[instance].databases[database]
        except KeyError:
            raise BrokerError(f"no database {database!r} in instance {instance!r}") from None

    def _procedure(self, key: QueueKey, name: str) -> ReaderBehaviour:
        procedures = self.instances[key.instance].databases[key.database].procedures
        if name not in procedures:
            raise BrokerError(f"no procedure {name!r} is declared in database {key.database!r}")
        return procedures[name]

    def _conversation(self, dialog: str) -> Conversation:
        try:
            return self.conversations[dialog]
        except KeyError:
            raise BrokerError(f"no dialog {dialog!r} has been begun") from None

    def _new_session(self, name: str) -> Session:
        session = Session(name, self._next_spid)
        self._next_spid += 1
        self.sessions[name] = session
        return session

    def session(self, name: str) -> Session:
        return self.sessions.get(name) or self._new_session(name)

    # ------------------------------------------------------------- commands
    def begin_dialog(
        self,
        at_ms: int,
        dialog: str,
        instance: str,
        database: str,
        from_service: str,
        to_service: str,
        to_broker_instance: str | None = None,
    ) -> dict[str, Any]:
        """BEGIN DIALOG only creates the initiator's endpoint; routing starts with the first SEND."""
        self.advance(at_ms)
        if dialog in self.conversations:
            raise BrokerError(f"dialog {dialog!r} has already been begun")
        db = self._database(instance, database)
        if from_service not in db.services:
            raise BrokerError(f"no service {from_service!r} in database {database!r} of instance {instance!r}")
        initiator = Endpoint(instance, database, from_service, db.broker_instance)
        broker = to_broker_instance.upper() if to_broker_instance else None
        self.conversations[dialog] = Conversation(dialog, initiator, to_service, target_broker_instance=broker)
        self.log.emit(
            at_ms,
            "dialog_begun",
            dialog=dialog,
            instance=instance,
            database=database,
            from_service=from_service,
            to_service=to_service,
            to_broker_instance=broker,
        )
        return {"dialog": dialog}

    def send(
        self, at_ms: int, dialog: str, message_type: str = "DEFAULT", body: str = "", from_target: bool = False
    ) -> dict[str, Any]:
        """SEND by the initiator, or by the target when ``from_target`` (a reply)."""
        self.advance(at_ms)
        conv = self._conversation(dialog)
        if from_target:
            if conv.target is None:
                raise BrokerError(f"dialog {dialog!r} has not reached a target yet, so the target cannot reply")
            sequence, conv.reply_sequence = conv.reply_sequence, conv.reply_sequence + 1
            env = Envelope(
                dialog,
                sequence,
                conv.initiator.service,
                conv.initiator.broker_instance,
                True,
                conv.target.instance,
                message_type,
                body,
            )
            origin, home = self.instances[conv.target.instance], conv.target.database
        else:
            sequence, conv.next_sequence = conv.next_sequence, conv.next_sequence + 1
            env = Envelope(
                dialog,
                sequence,
                conv.target_service,
                conv.target_broker_instance,
                False,
                conv.initiator.instance,
                message_type,
                body,
            )
            origin, home = self.instances[conv.initiator.instance], conv.initiator.database
        self.log.emit(at_ms, "message_sent", instance=origin.name, database=home, **env.fields())
        self.router.submit(env, origin, home)
        self.clock.run_pending()
        return {"message_sequence_number": sequence}

    def _deliver(self, env: Envelope, at: Instance, db: Database) -> None:
        conv = self.conversations[env.dialog]
        service = db.services[env.to_service]
        if not env.from_target and conv.target is None:
            conv.target = Endpoint(at.name, db.name, service.name, db.broker_instance)
        queue = self.queues[service.queue]
        conv.received[int(env.from_target)] = env.sequence + 1
        self._queuing_order += 1
        message = Message(
            self._queuing_order, env.dialog, env.dialog, env.sequence, env.message_type, env.body, self.clock.now_ms
        )
        arrived_on_empty = queue.unread() == 0
        queue.messages.append(message)
        self.log.emit(
            self.clock.now_ms,
            "message_arrived",
            **env.fields(),
            service=service.name,
            conversation_group=message.group,
            **queue.key.fields(),
        )
        if not env.from_target and not conv.acknowledged:
            self.acknowledge(conv, db)
        self.receiving.serve(queue.key)
        self.monitors.evaluate(queue, ARRIVAL, arrived_on_empty)

    def acknowledge(self, conv: Conversation, db: Database) -> None:
        """RTE-04: the acknowledgement names the target's broker instance; later messages carry it."""
        conv.acknowledged = True
        conv.target_broker_instance = db.broker_instance
        self.log.emit(
            self.clock.now_ms,
            "acknowledged",
            instance=conv.initiator.instance,
            dialog=conv.dialog,
            broker_instance=db.broker_instance,
        )

    def begin_transaction(self, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.begin(self.session(session)))

    def commit(self, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.commit(self.session(session)))

    def rollback(self, at_ms: int, session: str) -> None:
        self._statement(at_ms, lambda: self.receiving.rollback(self.session(session)))

    def receive(
        self,
        at_ms: int,
        session: str,
        key: QueueKey,
        *,
        top: int | None = None,
        where_dialog: str | None = None,
        where_group: str | None = None,
        waitfor_ms: int | None = None,
        get_conversation_group: bool = False,
    ) -> dict[str, Any]:
        self.advance(at_ms)
        self.queue(key)
        if where_dialog is not None:
            self._conversation(where_dialog)
        outcome: dict[str, Any] = {"status": "waiting"}

        def answered(rows: list[Message], group: str | None) -> None:
            outcome.update(
                status="empty" if group is None else "rows", rows=[m.row() for m in rows], conversation_group=group
            )

        statement = GET_CONVERSATION_GROUP if get_conversation_group else RECEIVE
        self._statement(
            at_ms,
            lambda: self.receiving.receive(
                self.session(session),
                key,
                statement=statement,
                top=top,
                where_dialog=where_dialog,
                where_group=where_group,
                waitfor_ms=waitfor_ms,
                on_result=answered,
            ),
        )
        return outcome

    def alter_queue(
        self,
        at_ms: int,
        key: QueueKey,
        *,
        status: bool | None = None,
        procedure_name: str | None = None,
        max_queue_readers: int | None = None,
    ) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        activation = queue.activation
        if procedure_name is not None:
            self._procedure(key, procedure_name)
        if max_queue_readers is not None and max_queue_readers < 0:
            raise BrokerError(f"MAX_QUEUE_READERS must be 0 or more, not {max_queue_readers}")
        if (status if status is not None else activation.status) and not (procedure_name or activation.procedure_name):
            raise BrokerError(f"ALTER QUEUE {key.queue}: activation STATUS = ON needs a PROCEDURE_NAME")
        if status is not None:
            activation.status = status
        if procedure_name is not None:
            activation.procedure_name = procedure_name
        if max_queue_readers is not None:
            activation.max_queue_readers = max_queue_readers
        self.log.emit(at_ms, "queue_altered", **key.fields())
        self.monitors.sync(queue)
        self.monitors.evaluate(queue, ALTER)
        self.clock.run_pending()

    def create_event_notification(self, at_ms: int, name: str, key: QueueKey) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        if name in queue.notifications:
            raise BrokerError(f"event notification {name!r} already exists on queue {key.queue!r}")
        queue.notifications.append(name)
        self.monitors.sync(queue)

    def drop_event_notification(self, at_ms: int, name: str, key: QueueKey) -> None:
        self.advance(at_ms)
        queue = self.queue(key)
        if name not in queue.notifications:
            raise BrokerError(f"no event notification {name!r} on queue {key.queue!r}")
        queue.notifications.remove(name)
        self.monitors.sync(queue)

    def exit_procedure(self, at_ms: int, key: QueueKey, task: int) -> None:
        self.advance(at_ms)
        found = self.monitors.find_task(self.queue(key).key, task)
        if found is None:
            raise BrokerError(f"activated task {task} of queue {key.queue!r} is not running")
        self.monitors.exit_procedure(found, "exited")
        self.clock.run_pending()

    # -------------------------------------------------------- routes, faults
    def _admin(self, at_ms: int, run: Any) -> None:
        self.advance(at_ms)
        try:
            run()
        except RouteAdminError as exc:
            raise BrokerError(str(exc)) from exc
        self.clock.run_pending()

    def create_route(self, at_ms: int, instance: str, database: str | None, spec: dict[str, Any]) -> None:
        self._admin(at_ms, lambda: self.routes.create(instance, database, spec))
        self.router.route_changed(instance)

    def alter_route(self, at_ms: int, instance: str, database: str | None, spec: dict[str, Any]) -> None:
        self._admin(at_ms, lambda: self.routes.alter(instance, database, spec))
        self.router.route_changed(instance)

    def drop_route(self, at_ms: int, instance: str, database: str | None, name: str) -> None:
        self._admin(at_ms, lambda: self.routes.drop(instance, database, name))
        self.router.route_changed(instance)

    def answer_routing_request(self, at_ms: int, instance: str, database: str | None, spec: dict[str, Any]) -> None:
        self._admin(at_ms, lambda: self.routes.answer_routing_request(instance, database, spec))

    def set_message_forwarding(self, at_ms: int, instance: str, active: bool) -> None:
        self._admin(at_ms, lambda: self.routes.set_forwarding(instance, active))

    def set_reachable(self, at_ms: int, instance: str, reachable: bool) -> None:
        self._admin(at_ms, lambda: self.routes.set_reachable(instance, reachable))
        if not reachable:
            self.transport.drop_links_to(self.instances[instance].address)

    # ------------------------------------------------- periodic-task faults
    def _instance(self, name: str) -> Instance:
        if name not in self.instances:
            raise BrokerError(f"no instance {name!r}")
        return self.instances[name]

    def _fault(self, at_ms: int, run: Any) -> None:
        self.advance(at_ms)
        try:
            run()
        except ValueError as exc:
            raise BrokerError(str(exc)) from exc
        self._sync_database_brokers()
        self.clock.run_pending()

    def fail_task_handlers(self, at_ms: int, instance: str, count: int) -> None:
        self._instance(instance)
        self._fault(at_ms, lambda: self.maintenance.fail_handlers(instance, count))

    def set_dispatcher_saving(self, at_ms: int, instance: str, mode: str, delay_s: float = 0) -> None:
        self._instance(instance)
        if mode not in ("running", "stopped") or delay_s < 0:
            raise BrokerError(
                f"dispatcher saving is 'running' (with a delay of 0 or more seconds) or 'stopped', not {mode!r}"
            )
        self._fault(at_ms, lambda: self.dispatchers[instance].set_saving(mode, int(delay_s * 1000)))

    def lose_in_transit(self, at_ms: int, dialog: str, sequence: int, from_target: bool = False) -> None:
        self._conversation(dialog)
        self._fault(at_ms, lambda: self.router.lost.add((dialog, from_target, sequence)))

    def drop_connection(self, at_ms: int, instance: str, address: str) -> None:
        self._instance(instance)
        link = (instance, address.upper())
        if link not in self.transport.connections:
            raise BrokerError(f"{instance} has no connection to {address}")
        self._fault(at_ms, lambda: self.transport.disconnect(link, "disconnected"))

    def fail_transmission(self, at_ms: int, dialog: str, reason: str) -> None:
        self._conversation(dialog)
        if reason not in ("resource", "security"):
            raise BrokerError(f"a transmission fails for a 'resource' or a 'security' reason, not {reason!r}")
        self._fault(at_ms, lambda: self.router.fail_dialog(dialog, reason))

    def create_master_key(self, at_ms: int, instance: str, database: str) -> None:
        self._database(instance, database)
        self._fault(at_ms, lambda: self.maintenance.create_master_key(instance, database))

    def stop_ack_cleanup(self, at_ms: int, instance: str, database: str) -> None:
        self._database(instance, database)
        self._fault(at_ms, lambda: self.maintenance.stop_ack_cleanup(instance, database))

    def failover(self, at_ms: int, instance: str, database: str) -> None:
        self._admin(at_ms, lambda: self.routes.make_principal(instance, database))

    def _statement(self, at_ms: int, run: Any) -> None:
        self.advance(at_ms)
        try:
            run()
        except ReceivingError as exc:
            raise BrokerError(str(exc)) from exc
        self.clock.run_pending()

    # ---------------------------------------------------------- observations
    def drain_events(self) -> list[Event]:
        return self.log.drain()

    def dm_broker_queue_monitors(self) -> list[dict[str, Any]]:
        rows = []
        for key, monitor in self.monitors.monitors.items():
            queue = self.queues[key]
            waiting = self.receiving.tasks_waiting(key)
            running = len(self.monitors.tasks[key])
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

    def sys_routes(self, instance: str, database: str | None) -> list[dict[str, Any]]:
        try:
            table = self.routes.table(instance, database)
        except RouteAdminError as exc:
            raise BrokerError(str(exc)) from exc
        return [
            {"instance": instance, "database": database or "msdb", **r.row()}
            for r in sorted(table.values(), key=lambda r: r.name)
        ]

    def conversation_endpoints(self) -> list[dict[str, Any]]:
        return [
            {
                "dialog": c.dialog,
                "instance": c.initiator.instance,
                "database": c.initiator.database,
                "far_service": c.target_service,
                "far_broker_instance": c.target_broker_instance,
                "acknowledged": c.acknowledged,
            }
            for c in self.conversations.values()
        ]

    def dm_broker_activated_tasks(self) -> list[dict[str, Any]]:
        return [
            {
                "spid": task.session.spid,
                "database_id": self.queues[key].database_id,
                "queue_id": self.queues[key].queue_id,
                **key.fields(),
                "task": task.ordinal,
                "procedure_name": self.queues[key].activation.procedure_name,
            }
            for key, tasks in self.monitors.tasks.items()
            for task in tasks
        ]
