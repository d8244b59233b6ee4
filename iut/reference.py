"""The reference engine, in process, behind the contract."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sbtck import contract, limits
from sbtck.engine import Broker, EngineParams
from sbtck.engine.choosing import Chooser
from sbtck.engine.params import PROFILE_PATH, load_profile
from sbtck.errors import BrokerError, ContractError

# The farthest one command may move the reference's clock. A day of a broker's timers is about a second of work
# and up to 150,000 events; a command years ahead would run for days and fill memory, so it is refused instead.
MAX_ADVANCE_S = int(os.environ.get("SBTCK_MAX_ADVANCE_S", str(24 * 3600)))


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
                self.broker = None
                limits.check_topology(values["topology"])
                self.broker = self.broker_class(values["topology"], values["at_ms"], self.params, self.chooser)
                self.broker.log.limit = limits.EVENTS_PER_COMMAND.value
                self.broker.log.too_many = _too_many_events
                return None, {}
            if self.broker is None:
                return f"{kind} before start: declare a topology first", {}
            if kind == contract.BeginDialog.kind and len(self.broker.conversations) >= limits.DIALOGS.value:
                raise limits.DIALOGS.exceeded(len(self.broker.conversations), "the scenario has begun")
            ahead_ms = values["at_ms"] - self.broker.clock.now_ms
            if ahead_ms > MAX_ADVANCE_S * 1000:
                raise ContractError(
                    f"{kind} at {values['at_ms']} is {ahead_ms / 1000:.0f} s after the previous command; the reference "
                    f"moves its clock at most {MAX_ADVANCE_S} s at once (SBTCK_MAX_ADVANCE_S)"
                )
            # every command the same way: the broker's method of its kind, the time first, then the command's values
            # by field name (contract.command_values: defaults filled in, a queue a QueueRef)
            del values["kind"]
            try:
                result = getattr(self.broker, kind)(values.pop("at_ms"), **values)
            except ContractError:
                # a limit reached mid-command leaves the broker half way: the scenario ends here, in error
                self.broker = None
                raise
        except BrokerError as exc:
            return str(exc), {}
        return None, result or {}

    def close(self) -> None:
        self.broker = None


def _too_many_events(count: int) -> Exception:
    return limits.EVENTS_PER_COMMAND.exceeded(count, "one command caused more than")


def reference() -> ReferenceImplementation:
    return ReferenceImplementation()
