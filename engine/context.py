"""What every part of the engine shares: the objects of the topology, the agenda, the log and the open values."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from sbtck.contract import QueueRef
from sbtck.engine.choosing import Chooser
from sbtck.engine.clockwork import Clockwork
from sbtck.engine.events import EventLog
from sbtck.engine.model import Instance, Queue
from sbtck.engine.params import EngineParams


@dataclass(frozen=True)
class Context:
    """Handed to each part at construction; a part keeps what it needs of it and nothing of the broker."""

    instances: dict[str, Instance]
    queues: dict[QueueRef, Queue]
    clock: Clockwork
    log: EventLog
    params: EngineParams
    # the one that makes every choice the documents leave open (sbtck/engine/choosing.py), the same for every part
    chooser: Chooser


T = TypeVar("T")
P = ParamSpec("P")


class Applies(Protocol):
    clock: Clockwork

    def advance(self, at_ms: int) -> None: ...


A = TypeVar("A", bound=Applies)


def command(method: Callable[Concatenate[A, P], T]) -> Callable[Concatenate[A, int, P], T]:
    """Makes a broker method a command: its first argument is the time, and it runs as ``Broker.apply`` runs an action.

    One convention for every command of the contract: what fell due up to the
    time runs first, then the command, then what the command set off at that
    same instant; a refusal leaves nothing half done. The method itself never
    moves time.
    """

    @functools.wraps(method)
    def at(self: A, at_ms: int, /, *args: P.args, **kwargs: P.kwargs) -> T:
        self.advance(at_ms)
        result = method(self, *args, **kwargs)
        self.clock.run_pending()
        return result

    return at
