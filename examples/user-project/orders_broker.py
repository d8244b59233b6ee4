"""This team's broker as the kit runs it in process: ``--sbtck-iut python:orders_broker:make``.

A real one answers the kit's commands itself (docs/protocol.md lists them;
``sbtck.iut.implementation.Implementation`` is their in-process form). This one
hands them to the kit's reference engine under a name of its own, so that the
example runs as written. It is found in the project's folder, as ``python -m``
finds a module, by ``pytest`` and ``sbtck`` alike.
"""

from sbtck.iut.reference import ReferenceImplementation


def make() -> ReferenceImplementation:
    return ReferenceImplementation(name="orders broker")
