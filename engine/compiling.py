"""The optional mypyc build (``bash scripts/compile.sh``): which modules it compiles, and how to tell it apart.

A compiled class cannot be subclassed by plain Python unless it says so,
and cannot take part in multiple inheritance unless it is a trait: the
engine's wrong variants and every plug-in subclass its parts. The two
decorators below carry that to mypyc and are nothing at all to plain Python,
so the kit needs mypy only to compile it.

A compiled dataclass keeps the ``__init__`` the dataclasses module writes
at import, which is plain Python: each instance built goes through the
interpreter. The dataclasses the engine builds most (some two hundred a
world: envelopes, messages, waits, the agenda's entries, routes and what
routing found) write their ``__init__`` out, first of their methods, and
say so with ``@dataclass(init=False)``; the build compiles it. Without
them the compiled engine took 18% longer a message and the stage 15%
longer a world (``python -m bench.bench_against HEAD --compiled --rounds 3
--worlds 600``, 2026-11-29); on plain Python they cost nothing (the
dataclasses module's own were 1% and 6% faster). This is the one reason
an engine class writes its ``__init__`` out: ``tests/engine/test_compiling.py``
holds each to its fields, and to declaring it.

This is the one place that says what the engine does for the build's sake;
the rule code carries no such remark. The rest of it:
- SEND and RECEIVE, the commands every message takes, are commands written
  out (``context.command``'s three steps inline; the decorator's generic call
  was a tenth of each), and ``command`` itself calls the method rather than
  handing ``Broker.apply`` a closure, one object fewer per command;
  tests/engine/test_engine.py holds both to the convention.
- A part that calls another several times a message names it by its class,
  not by a protocol (``Receiving``'s watcher, the queue monitors, by the class
  they subclass, ``receiving.ReceiveActivity``): the build then calls it
  directly. The router and the place messages arrive keep a
  named protocol (``room.Arrivals``): that call is once a message.
- The busiest events (a message sent, arrived, a RECEIVE's end) are written
  out field by field, not merged from an object's fields: every message makes
  them.
- A compiled class does not see a subclass replace a class attribute other
  than a method or a ``ClassVar``: the steps of routing are methods, not
  ``staticmethod`` aliases, so that a wrong variant can replace one.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
    from mypy_extensions import trait as trait
else:

    def trait(cls: Any) -> Any:
        return cls

    def mypyc_attr(*_: Any, **__: Any) -> Any:
        return lambda cls: cls


# What a world's check spends its time in; the rest of the kit is not worth a build that depends on the platform.
COMPILED_MODULES: tuple[str, ...] = (
    "sbtck.engine.activation",
    "sbtck.engine.activation_room",
    "sbtck.engine.administration",
    "sbtck.engine.broker",
    "sbtck.engine.choosing",
    "sbtck.engine.clockwork",
    "sbtck.engine.context",
    "sbtck.engine.dialogs",
    "sbtck.engine.dispatcher",
    "sbtck.engine.events",
    "sbtck.engine.external_activation",
    "sbtck.engine.forwarding",
    "sbtck.engine.internal_activation",
    "sbtck.engine.model",
    "sbtck.engine.monitor_checks",
    "sbtck.engine.params",
    "sbtck.engine.periodic",
    "sbtck.engine.receiving",
    "sbtck.engine.room",
    "sbtck.engine.route_admin",
    "sbtck.engine.router",
    "sbtck.engine.routing",
    "sbtck.engine.routing_attempt",
    "sbtck.engine.routing_memo",
    "sbtck.engine.statements",
    "sbtck.engine.topology",
    "sbtck.engine.transactions",
    "sbtck.engine.transmission",
    "sbtck.engine.transmission_queue",
    "sbtck.engine.transmitter",
    "sbtck.engine.transport",
    "sbtck.engine.views",
    "sbtck.workloads.draw",
    "sbtck.workloads.generate",
    "sbtck.workloads.invariants",
    "sbtck.workloads.landscape",
    "sbtck.workloads.trace",
)


def compiled_modules() -> list[str]:
    """The modules of COMPILED_MODULES this process runs compiled: none after a plain install."""
    return [name for name in COMPILED_MODULES if _extension(importlib.import_module(name))]


def _extension(module: ModuleType) -> bool:
    return isinstance(getattr(module.__spec__, "loader", None), ExtensionFileLoader)


def build() -> str:
    """Which build this process runs, for a benchmark's first line: its figures depend on it."""
    done = compiled_modules()
    if not done:
        return "plain Python"
    return f"compiled by mypyc ({len(done)} of {len(COMPILED_MODULES)} modules, scripts/compile.sh)"


def stale_modules(names: tuple[str, ...] = COMPILED_MODULES) -> list[str]:
    """Of the modules already imported, those compiled before their source last changed.

    Python imports a compiled module in place of its source, so an edit made
    after ``scripts/compile.sh`` would silently not run.
    """
    stale = []
    for name in names:
        module = sys.modules.get(name)
        if module is None or not _extension(module):
            continue
        # looked up in the package's folders: the origin a compiled module's spec gives is not always its file
        parent, _, stem = name.rpartition(".")
        for folder in map(Path, getattr(sys.modules[parent], "__path__", [])):
            source = folder / f"{stem}.py"
            built = [p for p in (folder / f"{stem}{s}" for s in EXTENSION_SUFFIXES) if p.exists()]
            if built and source.exists() and source.stat().st_mtime > built[0].stat().st_mtime:
                stale.append(name)
                break
    return stale


def warn_if_stale(package: str) -> None:
    """Called once the engine, then the stage, is imported, each for its own modules: a stale build says so in every
    process that runs it."""
    stale = [name for name in stale_modules() if name.startswith(f"{package}.")]
    if stale:
        warnings.warn(
            f"compiled modules older than their sources, so the old code runs: {', '.join(stale)}; "
            "compile again (bash scripts/compile.sh) or go back to plain Python (bash scripts/compile.sh --clean)",
            RuntimeWarning,
            stacklevel=2,
        )
