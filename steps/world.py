"""What a scenario knows while it runs: the implementation, the clock, the log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbtck import contract
from sbtck.errors import Refused, ScenarioError
from sbtck.fixtures.clock import ScenarioClock
from sbtck.fixtures.topology import Topology
from sbtck.iut.implementation import Implementation
from sbtck.iut.log_check import LogCheck
from sbtck.iut.profile import Profile
from sbtck.observations import TRACE
from sbtck.steps import timeexpr
from sbtck.topology import Route
from sbtck.visible import visible


@dataclass
class World:
    implementation: Implementation
    profile: Profile
    clock: ScenarioClock
    topology: Topology | None = None
    log: list[contract.Event] = field(default_factory=list)
    where: Callable[[], tuple[str, int]] = lambda: ("the scenario", 0)
    # every command run and its answer, in the workload stage's trace form (its reproducers check them)
    commands: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    # what a check step left out, by its line: (what and why, whether nothing was left to check)
    left_out: dict[int, tuple[str, bool]] = field(default_factory=dict)
    # the route tables as the scenario made them, by (instance, database or None for msdb): the topology's, then
    # every CREATE, ALTER and DROP ROUTE the implementation took; setup never depends on what a view answers
    routes: dict[tuple[str, str | None], dict[str, Route]] = field(default_factory=dict)
    # every answer held against the world the commands made, whatever a Then step reads (sbtck/iut/log_check.py)
    log_check: LogCheck = field(default_factory=LogCheck)
    # a reproducer's world, whose commands an allowed history may refuse: its Then steps judge a refusal, as the
    # stage does (phrases.REFUSALS_RECORDED), instead of the step that ran the command failing
    records_refusals: bool = False

    @property
    def step_at(self) -> tuple[str, int]:
        """The feature file and line of the step running now."""
        return self.where()

    def leave_out(self, what: str, *, everything: bool) -> None:
        """Say that the running step does not check WHAT, because the implementation does not trace decisions."""
        self.left_out[self.step_at[1]] = (f"{what}: the implementation does not declare {TRACE}", everything)

    def seconds(self, expression: str) -> float:
        return timeexpr.evaluate(expression, self.profile.param)

    def second_of(self, event: contract.Event) -> float:
        return (event.at_ms - self.clock.start_ms) / 1000

    def run(self, command: contract.Command) -> dict[str, Any]:
        response = self.implementation.execute(command)
        self.log.extend(response.events)
        op = command.to_json()
        self.commands.append(op)
        self.answers.append(
            {
                "kind": command.kind,
                "error": response.error,
                "result": response.result,
                "events": response.events,  # as JSON only when a reproducer's steps ask (sbtck/workloads/steps.py)
            }
        )
        self.log_check.answer(op, response.events)
        if response.error is not None and not self.records_refusals:
            raise Refused(
                f"the implementation refused {command.kind} at second {self.clock.second():g}: "
                + visible(response.error)
            )
        return response.result

    def start(self, topology: Topology) -> None:
        if self.topology is not None:
            raise ScenarioError("a scenario declares one topology; this one declares a second")
        self.topology = topology
        for instance in topology.plain.instances:
            self.routes[(instance.name, None)] = {r.name: r for r in instance.msdb_routes}
            for db in instance.databases:
                self.routes[(instance.name, db.name)] = {r.name: r for r in db.routes}
        self.run(contract.Start(self.clock.now_ms(), topology.plain))

    def route_table(self, instance: str, database: str | None) -> dict[str, Route]:
        """The routes the scenario has made in the table: the topology's and those its steps created since."""
        self.instance(instance)
        if (instance, database) not in self.routes:
            raise ScenarioError(f"no database {database!r} on {instance!r} in the topology")
        return self.routes[(instance, database)]

    @property
    def started(self) -> Topology:
        """The scenario's topology; a step before it is the scenario's mistake."""
        if self.topology is None:
            raise ScenarioError('no topology yet: start the scenario with Given the topology "NAME"')
        return self.topology

    def at(self) -> int:
        _ = self.started
        return self.clock.now_ms()

    def instance(self, name: str) -> str:
        topology = self.started
        known = [i.name for i in topology.plain.instances]
        if name not in known:
            raise ScenarioError(f"no instance {name!r} in topology {topology.source}; known: {', '.join(known)}")
        return name

    def broker_instance(self, text: str) -> str:
        """A GUID, or INSTANCE.DATABASE naming the database whose broker instance it is."""
        if "." not in text or "-" in text:
            return text
        instance, database = text.split(".", 1)
        for i in self.started.plain.instances:
            for d in i.databases:
                if (i.name, d.name) == (instance, database):
                    return d.broker_instance
        raise ScenarioError(f"no database {text!r} in the topology, so no broker instance of it")

    def queue(self, name: str) -> contract.QueueRef:
        return self.started.queue(name)

    def view(self, name: str) -> list[dict[str, Any]]:
        rows = self.run(contract.QueryView(self.at(), name)).get("rows", [])
        return list(rows)

    def forget(self) -> None:
        """Let go of the scenario's commands, answers and events once its record is made."""
        self.log.clear()
        self.answers.clear()
        self.commands.clear()

    def log_text(self, events: list[contract.Event] | None = None, head: int = 100, tail: int = 300) -> str:
        """The events as the failure messages show them: the first HEAD and the last TAIL, a flood left out."""
        lines = []
        events = self.log if events is None else events
        if len(events) > head + tail:
            left_out = len(events) - head - tail
            events = [
                *events[:head],
                contract.Event(events[head].at_ms, f"... {left_out} more events ...", {}),
                *events[-tail:],
            ]
        for event in events:
            extra = ", ".join(f"{k}={v}" for k, v in event.fields.items())
            lines.append(f"  second {self.second_of(event):>6g}  {event.kind.replace('_', ' '):<24} {extra}")
        return "\n".join(lines) or "  (no events)"
