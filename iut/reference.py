"""The reference engine, in process, behind the contract."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sbtck import contract as c
from sbtck.engine import Broker, EngineParams, faults, views
from sbtck.engine.choosing import Chooser
from sbtck.engine.params import PROFILE_PATH
from sbtck.errors import BrokerError

Handler = Callable[[Broker, Any], Any]


def _at(action: Callable[[Broker, Any], Any]) -> Handler:
    """A command applied at its time, through Broker.apply."""
    return lambda b, cmd: b.apply(cmd.at_ms, lambda: action(b, cmd))


DISPATCH: dict[type[c.Command], Handler] = {
    c.AdvanceTime: lambda b, cmd: b.advance(cmd.at_ms),
    c.BeginDialog: lambda b, cmd: b.begin_dialog(
        cmd.at_ms, cmd.dialog, cmd.instance, cmd.database, cmd.from_service, cmd.to_service, cmd.to_broker_instance
    ),
    c.Send: lambda b, cmd: b.send(cmd.at_ms, cmd.dialog, cmd.message_type, cmd.body, cmd.from_target),
    c.BeginTransaction: lambda b, cmd: b.begin_transaction(cmd.at_ms, cmd.session),
    c.Commit: lambda b, cmd: b.commit(cmd.at_ms, cmd.session),
    c.Rollback: lambda b, cmd: b.rollback(cmd.at_ms, cmd.session),
    c.Receive: lambda b, cmd: b.receive(
        cmd.at_ms,
        cmd.session,
        cmd.queue,
        top=cmd.top,
        where_dialog=cmd.where_dialog,
        where_group=cmd.where_group,
        waitfor_ms=cmd.waitfor_ms,
    ),
    c.GetConversationGroup: lambda b, cmd: b.receive(
        cmd.at_ms, cmd.session, cmd.queue, waitfor_ms=cmd.waitfor_ms, get_conversation_group=True
    ),
    c.AlterQueue: lambda b, cmd: b.alter_queue(
        cmd.at_ms,
        cmd.queue,
        status=None if cmd.status is None else cmd.status == "ON",
        procedure_name=cmd.procedure_name,
        max_queue_readers=cmd.max_queue_readers,
    ),
    c.CreateEventNotification: lambda b, cmd: b.create_event_notification(cmd.at_ms, cmd.name, cmd.queue),
    c.DropEventNotification: lambda b, cmd: b.drop_event_notification(cmd.at_ms, cmd.name, cmd.queue),
    c.ExitProcedure: lambda b, cmd: b.exit_procedure(cmd.at_ms, cmd.queue, cmd.task),
    c.CreateRoute: _at(lambda b, cmd: b.routes.create(cmd.instance, cmd.database, cmd.route)),
    c.AlterRoute: _at(lambda b, cmd: b.routes.alter(cmd.instance, cmd.database, cmd.route)),
    c.DropRoute: _at(lambda b, cmd: b.routes.drop(cmd.instance, cmd.database, cmd.name)),
    c.AnswerRoutingRequest: _at(lambda b, cmd: b.routes.answer_routing_request(cmd.instance, cmd.database, cmd.route)),
    c.SetMessageForwarding: _at(lambda b, cmd: b.routes.set_forwarding(cmd.instance, cmd.active)),
    c.SetReachable: _at(lambda b, cmd: faults.set_reachable(b, cmd.instance, cmd.reachable)),
    c.Failover: _at(lambda b, cmd: b.routes.make_principal(cmd.instance, cmd.database)),
    c.FailTaskHandlers: _at(lambda b, cmd: faults.fail_task_handlers(b, cmd.instance, cmd.count)),
    c.SetDispatcherSaving: _at(lambda b, cmd: faults.set_dispatcher_saving(b, cmd.instance, cmd.mode, cmd.delay_s)),
    c.LoseInTransit: _at(lambda b, cmd: faults.lose_in_transit(b, cmd.dialog, cmd.sequence, cmd.from_target)),
    c.DropConnection: _at(lambda b, cmd: faults.drop_connection(b, cmd.instance, cmd.address)),
    c.FailTransmission: _at(lambda b, cmd: faults.fail_transmission(b, cmd.dialog, cmd.reason)),
    c.CreateMasterKey: _at(lambda b, cmd: faults.create_master_key(b, cmd.instance, cmd.database)),
    c.StopAckCleanup: _at(lambda b, cmd: faults.stop_ack_cleanup(b, cmd.instance, cmd.database)),
    c.QueryView: _at(lambda b, cmd: {"rows": views.rows(b, cmd.view, cmd.instance, cmd.database)}),
}


class ReferenceImplementation:
    """Runs the engine in this process. ``broker_class`` lets tests swap in a variant."""

    def __init__(
        self,
        broker_class: type[Broker] = Broker,
        name: str = "",
        profile: Path = PROFILE_PATH,
        params: EngineParams | None = None,
        chooser: Chooser | None = None,
    ) -> None:
        self.broker_class = broker_class
        # the workload's differential check runs the reference with another implementation's values and choices
        self.params = params or EngineParams.reference()
        self.chooser = chooser
        self.profile = yaml.safe_load(profile.read_text())
        self.name = name or self.profile["implementation"]["name"]
        self.broker: Broker | None = None

    def handshake(self) -> c.Handshake:
        return c.Handshake(
            name=self.name,
            version=str(self.profile["implementation"]["version"]),
            capabilities=tuple(self.profile.get("capabilities", [])),
            params=dict(self.profile.get("params", {})),
        )

    def execute(self, command: c.Command) -> c.Response:
        try:
            if isinstance(command, c.Start):
                self.broker = self.broker_class(command.topology, command.at_ms, self.params, self.chooser)
                result: dict[str, Any] | None = {}
            elif self.broker is None:
                return c.Response(error=f"{command.kind} before start: declare a topology first")
            else:
                result = DISPATCH[type(command)](self.broker, command)
        except BrokerError as exc:
            return c.Response(error=str(exc), events=self._events())
        # a snapshot: the engine goes on updating what it returned (a RECEIVE that waits ends later)
        return c.Response(result=copy.deepcopy(result) if result else {}, events=self._events())

    def _events(self) -> list[c.Event]:
        if self.broker is None:
            return []
        return self.broker.drain_events()

    def close(self) -> None:
        self.broker = None


def reference() -> ReferenceImplementation:
    return ReferenceImplementation()
