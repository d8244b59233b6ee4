"""Every scenario holds for any value of the open parameters: the suite on the reference wherever a value collides.

A scenario writes its times from the declared values (``{activation_empty_window_s} + 1``), so whether two
things fall on one instant - a window's end and a timer notification, a time-out and an arrival - depends on
the value. The reference engine runs with the value and declares it (tests/fakes/tuned.py), connecting at once
or, for the routing values, also only when notified (PER-2A leaves that open).

Which values: the timer notifies every 5 seconds, and scenario times are a value's multiples in halves (0.5 x,
1.5 x, 2 x, 3 x) plus small constants, so at half-second steps the pattern of collisions with the timer grid
repeats every 10 seconds. Every whole and half second of a range of up to 30 seconds is run, and of a longer
one every whole and half second of its first 20 seconds (where a value meets the features' constants) and of
its last 10 (every place on the grid once more, far from any constant). The everyday run takes a seeded
sample of each parameter's values, another each day (tests/sampling.py); ``SBTCK_TEST_SAMPLE=all`` runs every
one. Between them, where a range is an hour, Hypothesis draws half seconds: each run tries others, and a value
that fails is kept in its example database and tried first until it passes. A count (forward_hop_limit) runs at
every value of its day's sample. Each value runs
the scenarios of the capability it belongs to; the routing values run connecting when notified as well
beyond the first band, where a connection's timing can meet a value's multiples.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbtck import catalogue
from sbtck.reports import results
from tests.helpers import Run, kit
from tests.sampling import sample

OPEN = {name: param for name, param in catalogue.load().params.items() if not param.fixed}
# the scenarios a value can change: those of the capability whose behaviour it tunes
AREA = {
    "activation_empty_window_s": "requires-activation",
    "external_activation_timeout_s": "requires-external-activation",
    "delayed_retry_s": "requires-routing",
    "forward_hop_limit": "requires-forwarding",
    "resend_after_s": "requires-routing",  # a message sent again: what arrives, and when, everywhere routing looks
    "principal_retry_s": "requires-mirroring",  # when both addresses of a mirrored route are asked again
}
ROUTING = {"delayed_retry_s", "forward_hop_limit", "resend_after_s", "principal_retry_s"}
COUNTS = {"forward_hop_limit"}
DENSE_S, TOP_S, DRAWN = 20, 10, 8


def _halves(low: float, high: float) -> list[float]:
    return [v / 2 for v in range(int(low * 2), int(high * 2) + 1)]


def sweep(name: str) -> list[float]:
    param = OPEN[name]
    assert param.low is not None and param.high is not None, f"{name} has no range in spec/rules.yaml"
    low, high = param.low, param.high
    if name in COUNTS:
        return [float(v) for v in range(int(low), int(high) + 1)]
    if high - low <= 30:
        return _halves(low, high)
    return [*_halves(low, low + DENSE_S), *_halves(high - TOP_S, high)]


def between(name: str) -> st.SearchStrategy[float]:
    """The half seconds of a long range that ``sweep`` leaves out."""
    low, high = OPEN[name].low, OPEN[name].high
    assert low is not None and high is not None
    return st.integers(int(2 * (low + DENSE_S) + 1), int(2 * (high - TOP_S) - 1)).map(lambda halves: halves / 2)


LONG = [name for name, param in OPEN.items() if name not in COUNTS and param.high - param.low > 30]  # type: ignore[operator]


def _factories(name: str, value: float) -> list[str]:
    notified = name in ROUTING and (name in COUNTS or value > OPEN[name].low + DENSE_S)  # type: ignore[operator]
    return ["tuned", "tuned_connecting_when_notified"] if notified else ["tuned"]


ALL_CASES = [(name, value, factory) for name in OPEN for value in sweep(name) for factory in _factories(name, value)]
# a day's sample of each parameter's sweep (tests/sampling.py): every case with SBTCK_TEST_SAMPLE=all
PER_PARAMETER = 8
CASES = [
    case
    for name in OPEN
    for case in sample([c for c in ALL_CASES if c[0] == name], PER_PARAMETER, f"open values: {name}")
]


def test_every_open_parameter_is_swept() -> None:
    assert set(OPEN) == set(AREA), "a new open parameter needs its capability in AREA"
    window = sweep("activation_empty_window_s")
    assert window[:3] == [1, 1.5, 2] and window[-1] == 30 and len(window) == 59
    retry = sweep("delayed_retry_s")
    assert {v % 10 for v in retry if v > 3000} == {v / 2 for v in range(20)}, "every place on the timer grid"
    assert sorted(LONG) == ["delayed_retry_s", "external_activation_timeout_s", "principal_retry_s", "resend_after_s"]
    assert retry[40:42] == [21, 3590] and len(retry) == 41 + 21, "the band between is Hypothesis's"


def _passes(name: str, value: float, factory: str, out: Path) -> None:
    proc = kit(
        "run",
        "--iut",
        f"python:tests.fakes.tuned:{factory}",
        "--tags",
        AREA[name],
        "--out",
        str(out),
        env={"SBTCK_TUNED": f"{name}={value:g}"},
    )
    run = Run(proc.returncode, proc.stdout + proc.stderr, out)
    assert run.code == 0, f"{name}={value:g} ({factory}):\n{run.output[-3000:]}"
    scenarios = run.results()["scenarios"]
    assert {s["status"] for s in scenarios if results.INFORMATIVE not in s["tags"]} == {results.PASSED}
    assert run.results()["profile"]["params"][name] == value


@pytest.mark.parametrize(("name", "value", "factory"), CASES, ids=[f"{n}={v:g}-{f}" for n, v, f in CASES])
def test_the_suite_passes_on_the_reference_with_the_value(
    name: str, value: float, factory: str, tmp_path: Path
) -> None:
    _passes(name, value, factory, tmp_path)


@pytest.mark.parametrize("name", LONG)
@settings(max_examples=DRAWN, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_suite_passes_on_the_reference_with_a_value_drawn_between(
    name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    value = data.draw(between(name), label=name)
    factory = data.draw(st.sampled_from(_factories(name, value)), label="factory")
    _passes(name, value, factory, tmp_path_factory.mktemp("drawn"))
