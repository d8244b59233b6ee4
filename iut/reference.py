"""The reference engine, in process, behind the contract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sbtck import contract as c
from sbtck.engine import Broker, EngineParams
from sbtck.engine.choosing import Chooser
from sbtck.engine.params import PROFILE_PATH
from sbtck.errors import BrokerError

Handler = Callable[[Broker, Any], Any]


# Every command the same way: the broker's method of that name, the time first (see engine.context.command).
DISPATCH: dict[type[c.Command], Handler] = {
    c.AdvanceTime: lambda b, cmd: b.advance_time(cmd.at_ms),
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
    c.CreateRoute: lambda b, cmd: b.create_route(cmd.at_ms, cmd.instance, cmd.database, cmd.route),
    c.AlterRoute: lambda b, cmd: b.alter_route(cmd.at_ms, cmd.instance, cmd.database, cmd.route),
    c.DropRoute: lambda b, cmd: b.drop_route(cmd.at_ms, cmd.instance, cmd.database, cmd.name),
    c.AnswerRoutingRequest: lambda b, cmd: b.answer_routing_request(cmd.at_ms, cmd.instance, cmd.database, cmd.route),
    c.SetMessageForwarding: lambda b, cmd: b.set_message_forwarding(cmd.at_ms, cmd.instance, cmd.active),
    c.SetReachable: lambda b, cmd: b.set_reachable(cmd.at_ms, cmd.instance, cmd.reachable),
    c.Failover: lambda b, cmd: b.failover(cmd.at_ms, cmd.instance, cmd.database),
    c.FailTaskHandlers: lambda b, cmd: b.fail_task_handlers(cmd.at_ms, cmd.instance, cmd.count),
    c.SetDispatcherSaving: lambda b, cmd: b.set_dispatcher_saving(cmd.at_ms, cmd.instance, cmd.mode, cmd.delay_s),
    c.LoseInTransit: lambda b, cmd: b.lose_in_transit(cmd.at_ms, cmd.dialog, cmd.sequence, cmd.from_target, cmd.every),
    c.DropConnection: lambda b, cmd: b.drop_connection(cmd.at_ms, cmd.instance, cmd.address),
    c.FailTransmission: lambda b, cmd: b.fail_transmission(cmd.at_ms, cmd.dialog, cmd.reason),
    c.CreateMasterKey: lambda b, cmd: b.create_master_key(cmd.at_ms, cmd.instance, cmd.database),
    c.StopAckCleanup: lambda b, cmd: b.stop_ack_cleanup(cmd.at_ms, cmd.instance, cmd.database),
    c.QueryView: lambda b, cmd: {"rows": b.query_view(cmd.at_ms, cmd.view, cmd.instance, cmd.database)},
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
        response = self._apply(command)
        response.events = [] if self.broker is None else self.broker.drain_events()
        return response

    def execute_json(self, command: c.Command) -> tuple[c.Response, list[dict[str, Any]]]:
        """``execute``, its events as the JSON objects a workload's trace keeps rather than in the response.

        The same events, each equal to its ``Event.to_json()``: a world makes
        hundreds, and building each as an object to turn it into a dict again
        was a tenth of checking the world.
        """
        if type(self).execute is not ReferenceImplementation.execute:
            # a subclass that changes execute (a test's dying worker, a variant) is run through its own execute
            response = self.execute(command)
            return response, [e.to_json() for e in response.events]
        response = self._apply(command)
        return response, [] if self.broker is None else self.broker.drain_events_json()

    def _apply(self, command: c.Command) -> c.Response:
        try:
            if isinstance(command, c.Start):
                self.broker = self.broker_class(command.topology, command.at_ms, self.params, self.chooser)
                result: dict[str, Any] | None = {}
            elif self.broker is None:
                return c.Response(error=f"{command.kind} before start: declare a topology first")
            else:
                result = DISPATCH[type(command)](self.broker, command)
        except BrokerError as exc:
            return c.Response(error=str(exc))
        return c.Response(result=result or {})

    def close(self) -> None:
        self.broker = None


def reference() -> ReferenceImplementation:
    return ReferenceImplementation()
