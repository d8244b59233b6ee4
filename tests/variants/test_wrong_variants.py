"""The suite has teeth: every deliberately wrong broker fails at least one scenario.

Each wrong broker runs the features of its own area first (``tests.variants.AREA:NAME`` runs ``features/AREA``,
a third of the suite's cost), and the whole suite only where they do not catch it: a fault of one area's rules
may show in another's scenarios (a routing fault in the periodic transport's). Every one runs with its decision
trace each day; without it (what a real broker shows alone) a day's sample runs, another each day, and every one
with ``SBTCK_TEST_SAMPLE=all`` (tests/sampling.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sbtck.engine.params import PROFILE_PATH
from sbtck.observations import TRACE
from sbtck.reports import results
from tests.helpers import ROOT, Run, sbtck
from tests.sampling import sample
from tests.variants import activation, periodic, routing

ALL = (
    [f"tests.variants.activation:{v}" for v in activation.VARIANTS]
    + [f"tests.variants.routing:{v}" for v in routing.VARIANTS]
    + [f"tests.variants.periodic:{v}" for v in periodic.VARIANTS]
)


def features_of(variant: str) -> str:
    """The features of the wrong broker's area: tests.variants.routing:NAME runs features/routing."""
    return str(ROOT / "features" / variant.split(":")[0].rsplit(".", 1)[1])


def caught(variant: str, out: Path, *args: str) -> Run:
    """The run that fails VARIANT: its area's features, or the whole suite where they pass it."""
    run = sbtck("--iut", f"python:{variant}", *args, "--features", features_of(variant), out=out / "area")
    if run.code == 1 and "failed" in run.statuses().values():
        return run
    return sbtck("--iut", f"python:{variant}", *args, out=out / "all")


@pytest.mark.parametrize("variant", ALL)
def test_variant_fails_a_scenario(variant: str, tmp_path: Path) -> None:
    run = caught(variant, tmp_path)
    failed = [sid for sid, status in run.statuses().items() if status == "failed"]
    assert run.code == 1, run.output[-3000:]
    assert failed, f"wrong variant {variant} passed every scenario"
    assert run.results()["implementation"]["name"] == f"wrong variant: {variant.split(':')[1]}"


def without_decision_trace(folder: Path) -> Path:
    """The reference's profile, declaring every capability but decision_trace."""
    profile = yaml.safe_load(PROFILE_PATH.read_text())
    profile["capabilities"] = [c for c in profile["capabilities"] if c != TRACE]
    path = folder / "black-box.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


# Faults no broker's observable behaviour can show, only its reasoning. At step 3 (RTM-3) keeping every broker
# instance's routes after picking one: whichever route is then chosen is also the choice of the broker instance
# it names, so every destination is one an allowed pick gives (routing/02 [4] says so). At step 6 (RTM-6) taking
# a conversation that names a broker instance as held here when no database of the instance holds its service:
# choosing passes the LOCAL route over for that very reason (RTC-2), so the conversation is delayed as at step 7.
TRACE_ONLY = {
    "tests.variants.routing:step_3_keeps_every_broker_instance",
    "tests.variants.routing:step_6_without_the_service",
}


def test_the_faults_only_a_trace_shows_are_wrong_variants() -> None:
    assert set(ALL) >= TRACE_ONLY


# a day's sample of the black-box runs: each is the area's features once more, and the runs with the trace above
# already hold every variant to the suite each day
BLACK_BOX_PER_DAY = 30


@pytest.mark.parametrize(
    "variant", sample([v for v in ALL if v not in TRACE_ONLY], BLACK_BOX_PER_DAY, "wrong variants as black boxes")
)
def test_variant_fails_a_scenario_without_its_decision_trace(variant: str, tmp_path: Path) -> None:
    """Black box first: what a real broker shows catches each fault, without the engine's reasoning."""
    profile = without_decision_trace(tmp_path)
    run = caught(variant, tmp_path, "--profile", str(profile))
    failed = [sid for sid, status in run.statuses().items() if status == "failed"]
    assert run.code == 1, run.output[-3000:]
    assert failed, f"wrong variant {variant} passed every scenario when only observable checks ran"


def test_the_reference_engine_itself_passes(tmp_path: Path) -> None:
    run = sbtck(out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    assert set(run.statuses().values()) == {"passed"}


def test_no_scenario_depends_on_which_allowed_choice_is_made(tmp_path: Path) -> None:
    """Where the documents let the broker pick, the other pick passes every scenario too."""
    run = sbtck("--iut", "python:tests.variants.routing:last_choices", out=tmp_path)
    assert run.code == 0, run.output[-3000:]
    scenarios = run.results()["scenarios"]
    assert {s["status"] for s in scenarios if results.INFORMATIVE not in s["tags"]} == {results.PASSED}
    # an informative scenario shows what the reference engine chose where the documents are silent (which ready
    # group GET CONVERSATION GROUP answers with): the other choice differs there, and the run conforms
    assert {s["status"] for s in scenarios if results.INFORMATIVE in s["tags"]} <= {results.PASSED, results.DIFFERS}


@pytest.mark.parametrize("variant", routing.CRASHES)
def test_a_broker_that_crashes_is_an_error_of_the_implementation(variant: str, tmp_path: Path) -> None:
    """No scenario can call a crash a wrong answer: the scenarios it meets are errors, and the run does not conform."""
    run = sbtck("--iut", f"python:tests.variants.routing:{variant}", out=tmp_path)
    errors = [sid for sid, status in run.statuses().items() if status == "error"]
    assert run.code == 1, run.output[-3000:]
    assert errors, f"{variant} crashed in no scenario"
    assert "a message it holds" in run.output or "a message it holds" in str(run.results())
