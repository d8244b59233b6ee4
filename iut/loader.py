"""Turns an IUT spec from the command line or config into an implementation."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from iut.implementation import Implementation

SPEC_HELP = "'reference' or 'python:MODULE:FACTORY'"


class IUTSpecError(ValueError):
    pass


def factory_for(spec: str) -> Callable[[], Implementation]:
    """Resolve the spec at once, so a typo fails before any scenario runs."""
    if spec == "reference":
        from iut.reference import reference

        return reference
    if spec.startswith("python:"):
        parts = spec.split(":")
        if len(parts) != 3 or not all(parts[1:]):
            raise IUTSpecError(f"--iut {spec!r}: write python:MODULE:FACTORY, e.g. python:mybroker.kit:make")
        _, module_name, attr = parts
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise IUTSpecError(f"--iut {spec!r}: cannot import module {module_name!r}: {exc}") from None
        factory = getattr(module, attr, None)
        if not callable(factory):
            raise IUTSpecError(f"--iut {spec!r}: module {module_name!r} has no callable {attr!r}")
        return factory  # type: ignore[no-any-return]
    raise IUTSpecError(f"--iut {spec!r}: unknown kind of implementation; use {SPEC_HELP}")
