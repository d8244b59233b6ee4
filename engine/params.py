"""The values the documents leave open, as the reference engine chose them."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

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
    timer_period_s: int = 5
    # the open times may be any number of seconds in their range, a half included (implementing.md, 2)
    activation_empty_window_s: float = 5
    external_activation_timeout_s: float = 60
    delayed_retry_s: float = 10
    forward_hop_limit: int = 4
    dispatcher_stale_s: int = 10
    suppress_after_disconnect_s: int = 15
    suppress_after_failed_connect_s: int = 60
    connection_idle_close_s: int = 90
    forward_stale_s: int = 60
    task_handlers_per_cpu: int = 2
    # the documents do not say whether a message no acknowledgement came for is sent again: 0, never (the
    # reference); N, after N seconds, then twice as long each time up to RESEND_LONGEST_MS, as an implementation
    # declares it does
    resend_after_s: float = 0

    @classmethod
    def reference(cls) -> EngineParams:
        data: dict[str, Any] = _parsed(PROFILE_PATH)["params"]
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
