"""The Then steps of the workload stage's reproducers: the recorded trace, checked as the stage checks it."""

from __future__ import annotations

from sbtck import contract
from sbtck.errors import ScenarioError
from sbtck.steps import phrases
from sbtck.steps.vocabulary import step_for
from sbtck.steps.world import World
from sbtck.workloads.generate import WAITING_VIEWS, StageWorld
from sbtck.workloads.search import BUDGET as SEARCH_BUDGET
from sbtck.workloads.stage import violations
from sbtck.workloads.trace import Trace


def _recorded(world: World) -> tuple[StageWorld, Trace]:
    """The scenario as the stage saw it: its commands, ending with where undelivered messages wait."""
    if not any(cmd["kind"] == "query_view" and cmd["view"] == WAITING_VIEWS[-1] for cmd in world.commands):
        for view in WAITING_VIEWS:
            world.run(contract.QueryView(world.at(), view))
    script = StageWorld(seed=0, version=0, topology=world.commands[0].get("topology", {}), script=list(world.commands))
    answers = [{**answer, "events": [e.to_json() for e in answer["events"]]} for answer in world.answers]
    return script, Trace(0, answers)


def _where(script: StageWorld, step: int) -> str:
    return f"command {step} ({script.script[step]['kind'] if step < len(script.script) else 'the end'})"


def _report(found: list[str]) -> None:
    if found:
        raise AssertionError("the workload stage's checks fail:\n  " + "\n  ".join(found))


@step_for(phrases.REFUSALS_RECORDED)
def refusals_recorded(world: World) -> None:
    world.records_refusals = True


@step_for(phrases.INVARIANTS_HOLD)
def invariants_hold(world: World) -> None:
    script, trace = _recorded(world)
    found = violations(script, trace, None).found
    _report([f"{v.rule} at {_where(script, v.at_step)}: {v.detail}" for v in found])


@step_for(phrases.SAME_AS_REFERENCE)
def same_as_reference(world: World) -> None:
    script, trace = _recorded(world)
    checked = violations(script, trace, world.implementation.handshake())
    if checked.undecided:  # no branch explained it, but untried ones might: the kit cannot blame the implementation
        raise ScenarioError(
            f"the search of the reference's allowed choices ran out of its budget ({SEARCH_BUDGET} runs) before it"
            " could say whether this trace is allowed; the closest branch: "
            + "; ".join(f"{v.rule} at {_where(script, v.at_step)}: {v.detail}" for v in checked.differences)
        )
    _report([f"{v.rule} at {_where(script, v.at_step)}: {v.detail}" for v in checked.differences])
