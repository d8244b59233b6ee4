"""The values the documents leave open, as the reference engine chose them."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from sbtck import catalogue

# package data: found the same way in a checkout and in an installed wheel
PROFILE_PATH = Path(str(resources.files(__name__.rpartition(".")[0]).joinpath("profile.yaml")))
# each profile's text, parsed: the workload's differential check builds a reference (and its parameters) for every
# connecting choice of every world, and one parse of the YAML takes longer than checking a world
_PARSED: dict[str, dict[str, Any]] = {}


def _parsed(path: Path) -> dict[str, Any]:
    """The profile at PATH as parsed, shared: read it, never change it."""
    text = path.read_text()
    parsed = _PARSED.get(text)
    if parsed is None:
        parsed = _PARSED[text] = yaml.safe_load(text)
    return parsed


def load_profile(path: Path = PROFILE_PATH) -> dict[str, Any]:
    """The implementation profile at PATH, a copy of its own for the caller: parsed once while its text is the same."""
    return copy.deepcopy(_parsed(path))


@dataclass(frozen=True)
class EngineParams:
    """The values the engine runs with, none of them its own: what the documents fix comes from the catalogue
    (spec/rules.yaml), what they leave open from a profile (the reference's, or another implementation's)."""

    timer_period_s: int
    # the open times may be any number of seconds in their range, a half included (implementing.md, 2)
    activation_empty_window_s: float
    external_activation_timeout_s: float
    delayed_retry_s: float
    forward_hop_limit: int
    dispatcher_stale_s: int
    suppress_after_disconnect_s: int
    suppress_after_failed_connect_s: int
    connection_idle_close_s: int
    forward_stale_s: int
    task_handlers_per_cpu: int
    # the documents do not say whether a message no acknowledgement came for is sent again: 0, never (the
    # reference); N, after N seconds, then twice as long each time up to the catalogue's most, as an
    # implementation declares it does
    resend_after_s: float = 0
    # nor how soon both addresses of a mirrored route are asked again when neither claimed the principal role
    # (RTR-5): 0, at each 2nd timer notification (the reference); N, N seconds after the last asking, as declared
    principal_retry_s: float = 0

    @classmethod
    def reference(cls) -> EngineParams:
        return cls.declared(_parsed(PROFILE_PATH)["params"])

    @classmethod
    def declared(cls, values: dict[str, Any]) -> EngineParams:
        """The catalogue's fixed values, with VALUES for the open ones (a name the engine does not run is left)."""
        fixed = {name: param.value for name, param in catalogue.load().params.items() if param.fixed}
        return cls(**{k: v for k, v in {**fixed, **values}.items() if k in cls.__dataclass_fields__})
