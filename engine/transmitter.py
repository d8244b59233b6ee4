"""The transmitter of each instance: what registers again, and when (PER-2A, PER-2B), and the faults that stop it.

The transmitter connects to destinations with pending messages and sends
(PER-2A); on every 2nd timer notification it reclassifies dialogs touched
by metadata changes, route expirations or failures (PER-2B): "all or
selected dialogs", a choice the documents leave open (RECLASSIFIED).
"""

from __future__ import annotations

from collections.abc import Iterable

from sbtck.engine.choosing import (
    ACKNOWLEDGEMENT_READING,
    NEVER_RECLASSIFIES,
    NOTIFICATION_FIRST,
    RECLASSIFIED,
    RECLASSIFIED_NEXT,
    RECLASSIFIES,
    RECLASSIFYING,
    REGISTERS_AGAIN,
    REPLY,
    ROUTED_AFTER,
    SENT_AFTER,
    STAYS_REGISTERED,
    TIME_OUT_AND_NOTIFICATION,
    TIME_OUT_FIRST,
    Reading,
)
from sbtck.engine.compiling import mypyc_attr
from sbtck.engine.context import Context
from sbtck.engine.model import Route
from sbtck.engine.room import Room
from sbtck.engine.transmission_queue import CONNECTING, DELAYED, FAILED, NO_PRINCIPAL, Waiting
from sbtck.engine.transport import Transport
from sbtck.observations import Kind


@mypyc_attr(allow_interpreted_subclasses=True)
class Transmitter(Room):
    def __init__(self, ctx: Context, transport: Transport) -> None:
        super().__init__(ctx)
        self.transport = transport
        self.failed: dict[str, str] = {}
        self.failed_at: dict[str, set[str]] = {}  # the instances whose transmitters hold each failed dialog
        # instance -> the order number of its last route change; a dialog waiting since before it is touched
        self.metadata_changed: dict[str, int] = {}
        # per instance, since its last reclassification: when each route changed, and the service it names before
        # and after the change (None: any service)
        self.changed_services: dict[str, list[tuple[int, str | None]]] = {}
        self.last_reclassified_ms: dict[str, int] = {}
        self.reclassifying: str | None = None  # RECLASSIFYING, asked at the first reclassification
        self.acknowledgement_reading = Reading(ACKNOWLEDGEMENT_READING, SENT_AFTER, ROUTED_AFTER)

    def connect_and_send(self, only: str | None = None) -> None:
        """PER-2A: connect to destinations with pending messages that are not suppressed, then send (of the
        instance ONLY names, if it names one)."""
        waiting = self.queue.heads(CONNECTING, instance=only)
        opened = set(self.transport.connect_pending([(w.instance, str(w.address).upper()) for w in waiting]))
        for head in waiting:
            if (head.instance, str(head.address).upper()) in opened:
                self.once_connected(head)
        if not self.params.principal_retry_s:  # else each at its own time (_ask_again)
            for head in self.queue.heads(NO_PRINCIPAL, instance=only):
                self.queue._retry(head, self.transmission._standing(head))  # RTR-5: both addresses are tried again

    def once_connected(self, head: Waiting) -> None:
        """A message that waited for its connection is routed again; the documents do not say it is not."""
        self.queue._retry(head)

    def reclassify(self, instance: str) -> None:
        """PER-2B: dialogs touched by metadata changes, route expirations or failures register again."""
        since = self.last_reclassified_ms.get(instance, -1)
        self.last_reclassified_ms[instance] = self.clock.now_ms
        changed = self.metadata_changed.pop(instance, 0)
        changes = self.changed_services.pop(instance, [])
        heads = self._as_notified_first(
            instance, self.queue.heads(DELAYED, CONNECTING, NO_PRINCIPAL, FAILED, instance=instance)
        )
        # the expiries are looked at only when a dialog waits here: this runs twice a notification per instance
        touched = [h for h in heads if h.status == FAILED or h.order < changed] if heads else []
        expired = self._expired_since(instance, since) if heads and (len(touched) < len(heads) or changed) else []
        default = heads if expired else touched
        if heads and (changed or expired) and self._reclassifies():
            chosen = [
                h for h in heads if h.status == FAILED or self._selects(h, h in default, changed, changes, expired)
            ]
        else:
            chosen = default
        if chosen and not self._reclassifies():
            chosen = []
        if self.failed and self._reclassifies():
            chosen += [h for h in heads if h not in chosen and self._failed_waiting_otherwise(h, instance)]
        if len(chosen) > 1:
            chosen = self._in_order(instance, chosen)
        dialogs = [h.envelope.dialog for h in chosen]
        if self.failed and self._reclassifies():
            dialogs += self._idle_failures(instance, {h.envelope.dialog for h in heads})
        self.log.add(
            {
                "instance": instance,
                "dialogs": dialogs,
                "at_ms": self.clock.now_ms,
                "kind": Kind.TRANSMITTER_RECLASSIFIED,
            }
        )
        retried = self.queue.timed_out[1] if self.queue.timed_out[0] == self.clock.now_ms else []
        for head in chosen:
            self._resume(head.envelope.dialog, instance)
            if not any(head is w for w in retried):  # routed again at this instant already, by its time-out
                self.queue._retry(head)

    def _as_notified_first(self, instance: str, heads: list[Waiting]) -> list[Waiting]:
        """HEADS as the reclassification finds them; a message its time-out routed again at this instant is found as
        it waited before, where the notification comes first (TIME_OUT_AND_NOTIFICATION)."""
        at, retried = self.queue.timed_out
        if at != self.clock.now_ms:
            return heads
        for before in retried:
            if before.instance != instance:
                continue
            self._about(before.envelope, instance, TIME_OUT_AND_NOTIFICATION)
            options = [TIME_OUT_FIRST, NOTIFICATION_FIRST]
            if self.chooser.choose(TIME_OUT_AND_NOTIFICATION, options) == NOTIFICATION_FIRST:
                key = (before.envelope.dialog, before.envelope.from_target, before.place)
                heads = [h for h in heads if (h.envelope.dialog, h.envelope.from_target, h.place) != key] + [before]
        return heads

    def _failed_waiting_otherwise(self, head: Waiting, instance: str) -> bool:
        """RECLASSIFIED for a failed dialog whose message waits here for something else (its connection, its
        principal, a route): PER-2B resumes dialogs "that failed earlier for resource or security reasons", and
        one the fault found waiting has failed or not as one reads it; it registers again, and so resumes, or stays
        as it waits until the transmitter tries it (the reference's pick)."""
        dialog = head.envelope.dialog
        if head.status == FAILED or instance not in self.failed_at.get(dialog, ()):
            return False
        self._about(head.envelope, head.instance, RECLASSIFIED)
        return self.chooser.choose(RECLASSIFIED, [STAYS_REGISTERED, REGISTERS_AGAIN]) == REGISTERS_AGAIN

    def _idle_failures(self, instance: str, waiting: set[str]) -> list[str]:
        """RECLASSIFIED for a failed dialog with nothing waiting here: "all or selected dialogs", so it may register
        again, and so resume, or stay failed until a message of it waits (the reference's pick)."""
        resumed = []
        for dialog in [d for d in self.failed if instance in self.failed_at.get(d, ()) and d not in waiting]:
            about: dict[str, object] = {"dialog": dialog, "message_sequence_number": -1, "from_target": False}
            about["at_ms"], about[RECLASSIFIED] = self.clock.now_ms, True
            self.chooser.about(instance, about)
            if self.chooser.choose(RECLASSIFIED, [STAYS_REGISTERED, REGISTERS_AGAIN]) == REGISTERS_AGAIN:
                self._resume(dialog, instance)
                resumed.append(dialog)
        return resumed

    def _in_order(self, instance: str, heads: list[Waiting]) -> list[Waiting]:
        """RECLASSIFIED_NEXT: the order the documents do not give, one dialog at a time."""
        left = {h.envelope.dialog + (REPLY if h.envelope.from_target else ""): h for h in heads}
        ordered = []
        while len(left) > 1:
            self.chooser.about(instance, {RECLASSIFIED_NEXT: True, "at_ms": self.clock.now_ms})
            ordered.append(left.pop(self.chooser.choose(RECLASSIFIED_NEXT, list(left))))
        return ordered + list(left.values())

    def _selects(
        self,
        head: Waiting,
        by_default: bool,
        changed: int,
        changes: list[tuple[int, str | None]],
        expired: list[Route],
    ) -> bool:
        """RECLASSIFIED: "all or selected dialogs" - always one that a route changed or expired since it began to
        wait could match, so the change is taken up; the chooser's, one that has waited here since before the
        change, or is held for its connection or principal (BY_DEFAULT: the reference's pick); else none."""
        service = head.envelope.to_service
        if any(order > head.order and named in (None, service) for order, named in changes) or any(
            int(r.expires_ms or 0) > head.since_ms and r.service_name in (None, service) for r in expired
        ):
            return True
        if (
            not by_default
            and head.episode > changed
            and not (head.inside and head.status in (CONNECTING, NO_PRINCIPAL))
        ):
            return False  # it began to wait after the change: a delayed one is matched again by its own retries
        options = [REGISTERS_AGAIN, STAYS_REGISTERED] if by_default else [STAYS_REGISTERED, REGISTERS_AGAIN]
        self._about(head.envelope, head.instance, RECLASSIFIED)
        return self.chooser.choose(RECLASSIFIED, options) == REGISTERS_AGAIN

    def acknowledged(self, dialog: str, broker_instance: str) -> None:
        """RTE-04: the initiator's messages still waiting to be routed carry the target's broker instance, or not."""
        waiting = [w for w in self.queue.lines.get((dialog, False), ()) if w.inside]
        if not waiting:
            return
        if self.acknowledgement_reading.of(self.chooser) == ROUTED_AFTER:
            for w in waiting:
                w.envelope.to_broker_instance = broker_instance

    def _reclassifies(self) -> bool:
        """RECLASSIFYING, asked once: PER-2B's reclassification, or none (open without periodic_tasks)."""
        if self.reclassifying is None:
            self.reclassifying = self.chooser.choose(RECLASSIFYING, [RECLASSIFIES, NEVER_RECLASSIFIES])
        return self.reclassifying == RECLASSIFIES

    def _expired_since(self, instance: str, since: int) -> list[Route]:
        at = self.instances[instance]
        tables = [at.msdb_routes, *(d.routes for d in at.databases.values())]
        return [r for t in tables for r in t.values() if since < (r.expires_ms or -2) <= self.clock.now_ms]

    def route_changed(self, instance: str, *services: str | None) -> None:
        """A route of INSTANCE was created, altered or dropped; SERVICES: the service it named before and after."""
        order = self.queue.next_order()  # counted with the waits: a wait older than the change is touched by it
        self.routing.memo.routes_changed()
        self.metadata_changed[instance] = order
        self.changed_services.setdefault(instance, []).extend((order, named) for named in services)

    def fail_dialog(self, dialog: str, reason: str, ends: Iterable[str] = ()) -> None:
        """A fault: the transmitter cannot send the dialog's messages (memory, security) until reclassified; ENDS:
        the instances of its endpoints, whose transmitters hold it."""
        self.failed[dialog] = reason
        self.failed_at[dialog] = set(ends)

    def _resume(self, dialog: str, instance: str) -> None:
        """PER-2B: INSTANCE's transmitter registered DIALOG again, and sends it; the other end's transmitter holds it
        until it reclassifies it in turn (each instance has its own transmitter, with which a dialog registers)."""
        at = self.failed_at.get(dialog)
        if at is None:
            return
        at.discard(instance)
        if not at:
            del self.failed[dialog], self.failed_at[dialog]
