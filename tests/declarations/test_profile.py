"""Profiles: the open values are checked against the catalogue, with messages that say what to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbtck.engine.params import PROFILE_PATH
from sbtck.errors import ProfileError
from sbtck.iut.profile import check, load_file
from sbtck.iut.reference import reference


def test_the_reference_profile_loads_and_agrees_with_the_handshake() -> None:
    profile = load_file(PROFILE_PATH)
    assert profile.param("activation_empty_window_s") == 5
    assert profile.param("external_activation_timeout_s") == 60
    assert "external_activation" in profile.capabilities
    assert reference().handshake().params["external_activation_timeout_s"] == profile.param(
        "external_activation_timeout_s"
    )


def _profile(**params: object) -> dict[str, object]:
    return {"implementation": {"name": "x"}, "params": params}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _profile(activation_empty_windw_s=3),
            "unknown parameter 'activation_empty_windw_s'; did you mean 'activation_empty_window_s'?",
        ),
        (_profile(activation_empty_window_s="few"), "expected a positive number, got 'few'"),
        (_profile(activation_empty_window_s=-1), "expected a positive number, got -1"),
        (_profile(timer_period_s=10), "the documents fix timer_period_s at 5; a profile cannot change it"),
        (_profile(activation_empty_window_s=31), "activation_empty_window_s is 31; the catalogue allows 1 to 30"),
        (
            _profile(external_activation_timeout_s=0.5),
            "external_activation_timeout_s is 0.5; the catalogue allows 1 to",
        ),
        (_profile(forward_hop_limit=33), "forward_hop_limit is 33; the catalogue allows 1 to 32"),
        ({"params": {}}, "give the implementation's name"),
        ({"implementation": {"name": "x"}, "capabilities": ["telepathy"]}, "unknown capability 'telepathy'"),
        ({"implementation": {"name": "x"}, "colour": 1}, "unknown key 'colour'"),
    ],
)
def test_bad_profiles_are_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        check(data, "p.yaml")
    assert message in str(caught.value)


def test_a_profile_file_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("implementation: {name: mine}\nparams:\n  activation_empty_window_s: soon\n")
    with pytest.raises(
        ProfileError, match=r"mine.yaml:3: params.activation_empty_window_s: expected a positive number"
    ):
        load_file(path)


def test_a_missing_value_is_explained_when_a_scenario_needs_it() -> None:
    profile = check({"implementation": {"name": "x"}}, "p.yaml")
    with pytest.raises(ProfileError, match="gives no value for 'external_activation_timeout_s'"):
        profile.param("external_activation_timeout_s")
    assert profile.param("timer_period_s") == 5


def test_every_open_parameter_has_a_range_and_the_reference_lies_in_it() -> None:
    from sbtck import catalogue

    declared = reference().handshake().params
    for param in catalogue.load().params.values():
        if param.fixed or (param.optional and param.name not in declared):
            continue
        assert param.low is not None and param.high is not None and param.low <= param.high, param.name
        assert param.low <= declared[param.name] <= param.high, param.name


def test_a_profile_is_parsed_once_per_text_and_each_reader_gets_its_own_copy(tmp_path: Path) -> None:
    # the workload's differential check builds a reference per connecting choice of every world
    from sbtck.engine.params import load_profile
    from sbtck.iut.reference import ReferenceImplementation

    path = tmp_path / "profile.yaml"
    path.write_text("implementation: {name: first, version: 1}\nparams: {delayed_retry_s: 10}\n")
    mine = load_profile(path)
    mine["params"]["delayed_retry_s"] = 99
    assert load_profile(path)["params"]["delayed_retry_s"] == 10
    assert ReferenceImplementation(profile=path).handshake().name == "first"
    path.write_text("implementation: {name: second, version: 1}\nparams: {delayed_retry_s: 20}\n")
    assert ReferenceImplementation(profile=path).handshake().name == "second"
    assert load_profile(path)["params"]["delayed_retry_s"] == 20
