"""The message dispatcher: per-dialog buffers between the transport and user queues (PER-1C).

Messages that arrive over the network wait here until the dispatcher's
async tasks save them to their queue. On every timer notification the
buffers lose their out-of-order messages and the stale ones: those not
picked up within 10 seconds of arrival.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sbtck.engine.choosing import DELETED_AS, OUT_OF_ORDER, STALE, STALE_SPAN, Chooser, FirstChooser, Span
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Database, Envelope, Instance
from sbtck.observations import Kind

Save = Callable[[Envelope, Instance, Database], None]
# the next sequence number the receiving endpoint expects: the database's state, which a mirror shares
Expected = Callable[[str, bool], int]
RUNNING, STOPPED = "running", "stopped"


@dataclass(init=False)
class Buffered:
    envelope: Envelope
    database: str
    arrived_ms: int

    def __init__(self, envelope: Envelope, database: str, arrived_ms: int) -> None:
        self.envelope, self.database, self.arrived_ms = envelope, database, arrived_ms


@mypyc_attr(allow_interpreted_subclasses=True)
class Dispatcher:
    def __init__(
        self,
        ctx: Context,
        instance: Instance,
        save: Save,
        expected: Expected,
    ) -> None:
        self.instance = instance
        self.clock = ctx.clock
        self.log = ctx.log
        self.params = ctx.params
        self.save = save
        self.buffers: dict[tuple[str, bool], list[Buffered]] = {}
        self.expected = expected
        self.mode = RUNNING
        # the broker's, once it has them: one reading of the span for all its dispatchers
        self.chooser: Chooser = FirstChooser()
        self.staleness = Span(STALE_SPAN)
        self.delay_ms = 0

    def _emit(self, kind: str, item: Buffered, **fields: object) -> None:
        self.log.add(
            {
                "instance": self.instance.name,
                "database": item.database,
                **item.envelope.fields(),
                **fields,
                "at_ms": self.clock.now_ms,
                "kind": kind,
            }
        )

    def receive(self, env: Envelope, db: Database) -> None:
        key = (env.dialog, env.from_target)
        if self.params.resend_after_s and self._copy(key, env):
            return
        item = Buffered(env, db.name, self.clock.now_ms)
        self.buffers.setdefault(key, []).append(item)
        self.buffers[key].sort(key=lambda b: b.envelope.sequence)
        self._emit(Kind.DISPATCHER_BUFFERED, item)
        if self.mode == RUNNING and self.delay_ms:
            self.clock.at(self.clock.now_ms + self.delay_ms, lambda: self._save_in_order(key))
        else:
            self._save_in_order(key)

    def _copy(self, key: tuple[str, bool], env: Envelope) -> bool:
        """PER-1C: the dispatcher "validates" what it receives: a copy of a message it saved or holds is dropped."""
        return env.sequence < self.expected(*key) or any(
            b.envelope.sequence == env.sequence for b in self.buffers.get(key, ())
        )

    def _in_order(self, key: tuple[str, bool], item: Buffered) -> bool:
        return item.envelope.sequence == self.expected(*key)

    def _save_in_order(self, key: tuple[str, bool]) -> None:
        if self.mode != RUNNING:
            return
        line = self.buffers.get(key, [])
        while line and self._in_order(key, line[0]) and self.clock.now_ms - line[0].arrived_ms >= self.delay_ms:
            item = line.pop(0)
            self.save(item.envelope, self.instance, self.instance.databases[item.database])

    def set_saving(self, mode: str, delay_ms: int) -> None:
        self.mode, self.delay_ms = mode, delay_ms
        self.log.add(
            {
                "instance": self.instance.name,
                "mode": mode,
                "delay_s": delay_ms / 1000,
                "at_ms": self.clock.now_ms,
                "kind": Kind.DISPATCHER_SAVING,
            }
        )
        for key in list(self.buffers):
            self._save_in_order(key)
            # what arrived while saving was stopped is saved delay_s after its arrival, as any message: a save
            # due later is set now (else only a later arrival of its dialog would set one, and none may come)
            if mode == RUNNING:
                self._save_later(key, sorted({b.arrived_ms + delay_ms for b in self.buffers[key]}))

    def _save_later(self, key: tuple[str, bool], dues: list[int]) -> None:
        for due in dues:
            if due > self.clock.now_ms:
                self.clock.at(due, lambda: self._save_in_order(key))

    def sweep(self) -> None:
        """Every notification: drop out-of-order messages and those waiting 10 seconds or more."""
        stale = int(self.params.dispatcher_stale_s * 1000)
        for key, line in self.buffers.items():
            if not line:  # most dialogs' buffers are empty most of the time
                continue
            keep = []
            for item in line:
                if not self._in_order(key, item) and not self._follows(key, item, line):
                    self._emit(Kind.DISPATCHER_DELETED, item, reason=self._out_of_order_as(item, stale))
                elif self.staleness.over(self.clock.now_ms, item.arrived_ms + stale, self.chooser):
                    self._emit(Kind.DISPATCHER_DELETED, item, reason=STALE)
                else:
                    keep.append(item)
            line[:] = keep

    def _out_of_order_as(self, item: Buffered, stale: int) -> str:
        """DELETED_AS: an out-of-order message that is stale too is deleted for either reason."""
        if item.arrived_ms + stale > self.clock.now_ms:  # not stale, whatever a span's last instant reads
            return OUT_OF_ORDER
        if not self.staleness.over(self.clock.now_ms, item.arrived_ms + stale, self.chooser):
            return OUT_OF_ORDER
        self.chooser.about(self.instance.name, {**item.envelope.fields(), "at_ms": self.clock.now_ms, DELETED_AS: True})
        return self.chooser.choose(DELETED_AS, [OUT_OF_ORDER, STALE])

    def _follows(self, key: tuple[str, bool], item: Buffered, line: list[Buffered]) -> bool:
        """In order once the messages buffered before it are saved: no gap in between."""
        sequences = {b.envelope.sequence for b in line}
        return all(s in sequences for s in range(self.expected(*key), item.envelope.sequence))

    def rows(self) -> list[dict[str, object]]:
        return [
            {"instance": self.instance.name, "database": b.database, **b.envelope.fields(), "arrived_ms": b.arrived_ms}
            for line in self.buffers.values()
            for b in line
        ]
