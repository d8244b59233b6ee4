"""The reference engine, in process, behind the contract."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sbtck import contract
from sbtck.engine import Broker, EngineParams
from sbtck.engine.choosing import Chooser
from sbtck.engine.params import PROFILE_PATH, load_profile
from sbtck.errors import BrokerError, ContractError

# The farthest one command may move the reference's clock. A day of a broker's timers is about a second of work
# and up to 150,000 events; a command years ahead would run for days and fill memory, so it is refused instead.
MAX_ADVANCE_S = int(os.environ.get("SBTCK_MAX_ADVANCE_S", str(24 * 3600)))

Handler = Callable[[Broker, dict[str, Any]], Any]


# Every command the same way: the broker's method of that name, the time first (see engine.context.command),
# from the command's values by field name (contract.command_values: defaults filled in, a queue a QueueRef).
DISPATCH: dict[str, Handler] = {
    contract.AdvanceTime.kind: lambda b, v: b.advance_time(v["at_ms"]),
    contract.BeginDialog.kind: lambda b, v: b.begin_dialog(
        v["at_ms"],
        v["dialog"],
        v["instance"],
        v["database"],
        v["from_service"],
        v["to_service"],
        v["to_broker_instance"],
    ),
    contract.Send.kind: lambda b, v: b.send(v["at_ms"], v["dialog"], v["message_type"], v["body"], v["from_target"]),
    contract.BeginTransaction.kind: lambda b, v: b.begin_transaction(v["at_ms"], v["session"]),
    contract.Commit.kind: lambda b, v: b.commit(v["at_ms"], v["session"]),
    contract.Rollback.kind: lambda b, v: b.rollback(v["at_ms"], v["session"]),
    contract.Receive.kind: lambda b, v: b.receive(
        v["at_ms"],
        v["session"],
        v["queue"],
        top=v["top"],
        where_dialog=v["where_dialog"],
        where_group=v["where_group"],
        waitfor_ms=v["waitfor_ms"],
    ),
    contract.GetConversationGroup.kind: lambda b, v: b.receive(
        v["at_ms"], v["session"], v["queue"], waitfor_ms=v["waitfor_ms"], get_conversation_group=True
    ),
    contract.AlterQueue.kind: lambda b, v: b.alter_queue(
        v["at_ms"],
        v["queue"],
        status=None if v["status"] is None else v["status"] == "ON",
        procedure_name=v["procedure_name"],
        max_queue_readers=v["max_queue_readers"],
    ),
    contract.CreateEventNotification.kind: lambda b, v: b.create_event_notification(v["at_ms"], v["name"], v["queue"]),
    contract.DropEventNotification.kind: lambda b, v: b.drop_event_notification(v["at_ms"], v["name"], v["queue"]),
    contract.ExitProcedure.kind: lambda b, v: b.exit_procedure(v["at_ms"], v["queue"], v["task"]),
    contract.CreateRoute.kind: lambda b, v: b.create_route(v["at_ms"], v["instance"], v["database"], v["route"]),
    contract.AlterRoute.kind: lambda b, v: b.alter_route(v["at_ms"], v["instance"], v["database"], v["route"]),
    contract.DropRoute.kind: lambda b, v: b.drop_route(v["at_ms"], v["instance"], v["database"], v["name"]),
    contract.AnswerRoutingRequest.kind: lambda b, v: b.answer_routing_request(
        v["at_ms"], v["instance"], v["database"], v["route"]
    ),
    contract.SetMessageForwarding.kind: lambda b, v: b.set_message_forwarding(v["at_ms"], v["instance"], v["active"]),
    contract.SetReachable.kind: lambda b, v: b.set_reachable(v["at_ms"], v["instance"], v["reachable"]),
    contract.Failover.kind: lambda b, v: b.failover(v["at_ms"], v["instance"], v["database"]),
    contract.FailTaskHandlers.kind: lambda b, v: b.fail_task_handlers(v["at_ms"], v["instance"], v["count"]),
    contract.SetDispatcherSaving.kind: lambda b, v: b.set_dispatcher_saving(
        v["at_ms"], v["instance"], v["mode"], v["delay_s"]
    ),
    contract.LoseInTransit.kind: lambda b, v: b.lose_in_transit(
        v["at_ms"], v["dialog"], v["sequence"], v["from_target"], v["every"]
    ),
    contract.DropConnection.kind: lambda b, v: b.drop_connection(v["at_ms"], v["instance"], v["address"]),
    contract.FailTransmission.kind: lambda b, v: b.fail_transmission(v["at_ms"], v["dialog"], v["reason"]),
    contract.CreateMasterKey.kind: lambda b, v: b.create_master_key(v["at_ms"], v["instance"], v["database"]),
    contract.StopAckCleanup.kind: lambda b, v: b.stop_ack_cleanup(v["at_ms"], v["instance"], v["database"]),
    contract.QueryView.kind: lambda b, v: {"rows": b.query_view(v["at_ms"], v["view"], v["instance"], v["database"])},
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
        self.profile = load_profile(profile)
        self.name = name or self.profile["implementation"]["name"]
        self.broker: Broker | None = None

    def handshake(self) -> contract.Handshake:
        return contract.Handshake(
            name=self.name,
            version=str(self.profile["implementation"]["version"]),
            capabilities=tuple(self.profile.get("capabilities", [])),
            params=dict(self.profile.get("params", {})),
        )

    def execute(self, command: contract.Command) -> contract.Response:
        # a frozen command's __dict__ is its values by field name, a queue already a QueueRef
        error, result = self._apply({"kind": command.kind, **command.__dict__})
        events = [] if self.broker is None else self.broker.drain_events()
        return contract.Response(result=result, error=error, events=events)

    def execute_json(self, op: dict[str, Any]) -> tuple[str | None, dict[str, Any], list[dict[str, Any]]]:
        """A command's JSON run as ``execute`` runs the command: the error, the result and the events as JSON.

        What the workload stage runs its worlds with: a world is a script of
        JSON commands, and building each as a command object, and each event
        as an ``Event`` only to turn it into a dict again, was about a sixth of
        checking the world. Bad JSON is refused as ``command_from_json``
        refuses it (ContractError).
        """
        if type(self).execute is not ReferenceImplementation.execute:
            # a subclass that changes execute (a test's dying worker, a variant) is run through its own execute
            response = self.execute(contract.command_from_json(op))
            return response.error, response.result, [e.to_json() for e in response.events]
        error, result = self._apply(contract.command_values(op))
        return error, result, [] if self.broker is None else self.broker.drain_events_json()

    def _apply(self, values: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """The command's error (None when it was applied) and result."""
        kind = values["kind"]
        try:
            if kind == contract.Start.kind:
                self.broker = self.broker_class(values["topology"], values["at_ms"], self.params, self.chooser)
                return None, {}
            if self.broker is None:
                return f"{kind} before start: declare a topology first", {}
            ahead_ms = values["at_ms"] - self.broker.clock.now_ms
            if ahead_ms > MAX_ADVANCE_S * 1000:
                raise ContractError(
                    f"{kind} at {values['at_ms']} is {ahead_ms / 1000:.0f} s after the previous command; the reference "
                    f"moves its clock at most {MAX_ADVANCE_S} s at once (SBTCK_MAX_ADVANCE_S)"
                )
            result = DISPATCH[kind](self.broker, values)
        except BrokerError as exc:
            return str(exc), {}
        return None, result or {}

    def close(self) -> None:
        self.broker = None


def reference() -> ReferenceImplementation:
    return ReferenceImplementation()
