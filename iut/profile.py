"""Conformance profiles: an implementation's values for what the documents leave open.

A profile names the implementation, gives a value for each open parameter
of the catalogue it wants checked, lists the optional capabilities it
supports, and lists the scenarios it is expected to fail.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbtck import catalogue
from sbtck.contract import CAPABILITIES, Handshake
from sbtck.errors import ProfileError
from sbtck.fixtures.yamlfile import load, read

__all__ = ["CAPABILITIES", "Profile", "ProfileError", "check", "from_handshake", "load_expectations", "load_file"]


@dataclass(frozen=True)
class Profile:
    source: str
    name: str
    version: str
    params: dict[str, float]
    capabilities: frozenset[str]
    expected_failures: frozenset[str]

    def param(self, name: str) -> float:
        if name not in self.params:
            cat = catalogue.load()
            if name not in cat.params:
                raise ProfileError(f"{name!r} is not a parameter of the catalogue; known: {', '.join(cat.params)}")
            if cat.params[name].optional:
                return 0.0  # left out: what the engine's 0 says (never resends, asks again when notified)
            raise ProfileError(f"profile {self.source} gives no value for {name!r} ({cat.params[name].note})")
        return self.params[name]


def check(data: Any, source: str, where: Any = None) -> Profile:
    """Check profile data; ``where(path)`` names a line when the data came from a file."""

    def fail(path: tuple[str, ...], problem: str) -> ProfileError:
        place = where(path) if where else f"{source}: {'.'.join(path)}"
        return ProfileError(f"{place}: {problem}")

    if not isinstance(data, dict):
        raise fail((), "a profile is a mapping with implementation, params, capabilities, expected_failures")
    for key in data:
        if key not in ("implementation", "params", "capabilities", "expected_failures"):
            raise fail((str(key),), f"unknown key {key!r}")
    impl = data.get("implementation") or {}
    if not isinstance(impl, dict) or not impl.get("name"):
        raise fail(("implementation",), "give the implementation's name (implementation: {name: ..., version: ...})")
    known = catalogue.load().params
    params: dict[str, float] = {}
    given = data.get("params") or {}
    if not isinstance(given, dict):
        raise fail(("params",), f"a mapping of parameter names to numbers, got {type(given).__name__}")
    for name, value in given.items():
        if name not in known:
            hint = difflib.get_close_matches(str(name), known, n=1)
            raise fail(
                ("params", str(name)), f"unknown parameter {name!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise fail(("params", name), f"expected a positive number, got {value!r}")
        if known[name].fixed and value != known[name].value:
            raise fail(("params", name), f"the documents fix {name} at {known[name].value}; a profile cannot change it")
        low, high = known[name].low, known[name].high
        if low is not None and high is not None and not low <= value <= high:
            raise fail(
                ("params", name), f"{name} is {value}; the catalogue allows {low:g} to {high:g} ({known[name].note})"
            )
        params[name] = value
    for name, spec in known.items():
        if spec.fixed:
            params.setdefault(name, spec.value)
    caps = data.get("capabilities") or []
    if not isinstance(caps, list):
        raise fail(("capabilities",), f"a list of capabilities, got {type(caps).__name__}: {caps!r}"[:300])
    for cap in caps:
        if cap not in CAPABILITIES:
            raise fail(("capabilities",), f"unknown capability {cap!r}; known: {', '.join(CAPABILITIES)}")
    failures = data.get("expected_failures") or []
    if not isinstance(failures, list) or not all(isinstance(f, str) for f in failures):
        raise fail(("expected_failures",), "expected a list of scenario ids (feature path::scenario name)")
    return Profile(
        source, str(impl["name"]), str(impl.get("version", "")), params, frozenset(caps), frozenset(failures)
    )


def load_file(path: Path) -> Profile:
    if not path.is_file():
        raise ProfileError(f"profile {path}: no such file")
    doc = load(read(path, "profile"), str(path))
    return check(doc.data, str(path), doc.where)


def from_handshake(handshake: Handshake) -> Profile:
    data = {
        "implementation": {"name": handshake.name, "version": handshake.version},
        "params": handshake.params,
        "capabilities": list(handshake.capabilities),
    }
    return check(data, f"the handshake of {handshake.name}")


def load_expectations(path: Path) -> frozenset[str]:
    """A list of scenario ids (feature path::scenario name), or a mapping with expected_failures: [...]."""
    if not path.is_file():
        raise ProfileError(f"expectations {path}: no such file")
    doc = load(read(path, "expectations"), str(path))
    data = doc.data.get("expected_failures") if isinstance(doc.data, dict) else doc.data
    if not isinstance(data, list) or not all(isinstance(item, str) and "::" in item for item in data):
        raise ProfileError(
            f"expectations {path}: expected a list of scenario ids such as "
            "'features/activation/05_internal_activation.feature::[2] At MAX_QUEUE_READERS ...'"
        )
    return frozenset(data)
