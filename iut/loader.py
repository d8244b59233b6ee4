"""Turns an IUT spec from the command line or config into an implementation."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

from sbtck.errors import ImplementationFault, IUTSpecError
from sbtck.iut.implementation import Implementation

GROUP = "sbtck.implementations"
SPEC_HELP = (
    "'reference', 'python:MODULE:FACTORY', 'cmd:PROGRAM ARGS...', 'tcp:127.0.0.1:PORT', 'image:NAME[:TAG]', "
    f"or the name of an entry point of the group {GROUP}"
)


def _python(spec: str) -> Callable[[], Implementation]:
    parts = spec.split(":")
    if len(parts) != 3 or not all(parts[1:]):
        raise IUTSpecError(f"--iut {spec!r}: write python:MODULE:FACTORY, e.g. python:mybroker.kit:make")
    _, module_name, attr = parts
    # a module of the current folder, as `python -m` finds it: the console scripts (sbtck, pytest) do not put the
    # folder on the path, and a user's broker is most often right there; after the installed packages, never
    # shadowing them
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise IUTSpecError(f"--iut {spec!r}: cannot import module {module_name!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise IUTSpecError(f"--iut {spec!r}: module {module_name!r} has no callable {attr!r}")
    return factory  # type: ignore[no-any-return]


def implementation_made(spec: str, made: object) -> Implementation:
    """What the factory of SPEC returned, if it is an implementation: else the implementation's fault, naming it."""
    missing = [name for name in ("handshake", "execute", "close") if not callable(getattr(made, name, None))]
    if missing:
        raise ImplementationFault(
            f"--iut {spec}: the factory returned {type(made).__name__}, not an implementation "
            f"(it has no {', '.join(missing)}; see sbtck.iut.implementation.Implementation)"
        )
    return made  # type: ignore[return-value]


def _tcp(spec: str) -> Callable[[], Implementation]:
    from sbtck.iut.remote import RemoteImplementation, SocketChannel, request_timeout_s

    host, _, port = spec[len("tcp:") :].rpartition(":")
    if host not in ("127.0.0.1", "localhost") or not port.isdigit():
        raise IUTSpecError(f"--iut {spec!r}: write tcp:127.0.0.1:PORT; the kit talks to 127.0.0.1 only")
    if not 1 <= int(port) <= 65535:  # the socket layer would take 99999 modulo 65536, another port
        raise IUTSpecError(f"--iut {spec!r}: a port is a number from 1 to 65535")
    return lambda: RemoteImplementation(lambda: SocketChannel(host, int(port), request_timeout_s()))


def factory_for(spec: str, out: Path | None = None) -> Callable[[], Implementation]:
    """Resolve the spec at once, so a typo fails before any scenario runs."""
    if spec == "reference":  # built in, so that it also works where the kit is not pip-installed
        from sbtck.iut.reference import reference

        return reference
    if spec.startswith("python:"):
        return _python(spec)
    if spec.startswith("cmd:"):
        from sbtck.iut.remote import ProcessChannel, RemoteImplementation

        try:
            argv = shlex.split(spec[len("cmd:") :])
        except ValueError as exc:
            raise IUTSpecError(f"--iut {spec!r}: {exc}; quote the program's arguments as a shell would") from None
        if not argv:
            raise IUTSpecError(f"--iut {spec!r}: name a program, e.g. cmd:'node broker.js'")
        return lambda: RemoteImplementation(lambda: ProcessChannel(argv))
    if spec.startswith("tcp:"):
        return _tcp(spec)
    if spec.startswith("image:"):
        from sbtck.iut.container import ContainerImplementation

        image = spec[len("image:") :]
        if not image:
            raise IUTSpecError(f"--iut {spec!r}: write image:NAME[:TAG]")
        return lambda: ContainerImplementation(image, logs_dir=out)
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    if spec in found:
        factory = found[spec].load()
        if not callable(factory):
            raise IUTSpecError(f"--iut {spec!r}: entry point {found[spec].value} is not callable")
        return factory  # type: ignore[no-any-return]
    known = ", ".join(sorted(found)) or "none installed"
    raise IUTSpecError(f"--iut {spec!r}: unknown kind of implementation; use {SPEC_HELP} (entry points: {known})")
