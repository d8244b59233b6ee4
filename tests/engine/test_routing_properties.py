"""Hypothesis drives routing at random: every message sent is, at any moment, in exactly one place.

Delivered to a queue, dropped by a rule, deleted by the dispatcher or the
forwarder, lost in transit by a fault, or still waiting (transmission queue,
forwarder, dispatcher buffer) - never two of these, never none. And each
conversation's messages reach their queue in order.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sbtck.engine import Broker
from sbtck.engine.room import Room
from sbtck.engine.routing_attempt import Routing
from sbtck.engine.transmission_queue import TransmissionQueue
from sbtck.fixtures import topology
from sbtck.observations import Kind
from sbtck.topology import Route
from tests.helpers import assert_machine_fails
from tests.variants.rooms import router_with

ADDRESSES = ["TCP://sql1.example:4022", "TCP://sql2.example:4022", "TCP://sql5.example:4022"]
GONE = (Kind.MESSAGE_DROPPED, Kind.DISPATCHER_DELETED, Kind.FORWARDED_MESSAGE_DELETED, Kind.MESSAGE_LOST_IN_TRANSIT)
Msg = tuple[str, bool, int]


class RoutingMachine(RuleBasedStateMachine):
    broker_class: type[Broker] = Broker

    @initialize()
    def start(self) -> None:
        self.b = self.broker_class(topology.named("periodic").plain, 0)
        self.now = 0
        self.sent: Counter[Msg] = Counter()
        self.arrived: list[Msg] = []
        self.gone: Counter[Msg] = Counter()
        self.dialogs: list[str] = []
        self._absorb()

    def _absorb(self) -> None:
        for e in self.b.drain_events():
            msg = (
                str(e.fields.get("dialog")),
                bool(e.fields.get("from_target")),
                int(e.fields.get("message_sequence_number", -1)),
            )
            if e.kind == Kind.MESSAGE_ARRIVED:
                self.arrived.append(msg)
            elif e.kind in GONE:
                self.gone[msg] += 1

    @precondition(lambda self: len(self.dialogs) < 4)
    @rule()
    def begin(self) -> None:
        dialog = f"D{len(self.dialogs) + 1}"
        self.b.begin_dialog(self.now, dialog, "sql1", "shop", "Initiator", "Target")
        self.dialogs.append(dialog)

    @precondition(lambda self: self.dialogs)
    @rule(data=st.data(), count=st.integers(1, 3))
    def send(self, data: st.DataObject, count: int) -> None:
        dialog = data.draw(st.sampled_from(self.dialogs))
        for _ in range(count):
            seq = self.b.send(self.now, dialog)["message_sequence_number"]
            self.sent[(dialog, False, seq)] += 1
        self._absorb()

    @rule(
        address=st.sampled_from([*ADDRESSES, "LOCAL"]),
        table=st.sampled_from(["shop", None]),
        instance=st.sampled_from(["sql1", "sql5"]),
    )
    def reroute(self, address: str, table: str | None, instance: str) -> None:
        if instance == "sql5" and table is not None:
            return
        spec = Route("Chosen", "Target", address=address)
        admin = self.b.routes

        def replace() -> None:
            if "Chosen" in admin.table(instance, table):
                admin.drop(instance, table, "Chosen")
            admin.create(instance, table, spec)

        self.b.apply(self.now, replace)
        self._absorb()

    @rule(instance=st.sampled_from(["sql2", "sql5"]), reachable=st.booleans())
    def reachability(self, instance: str, reachable: bool) -> None:
        self.b.set_reachable(self.now, instance, reachable)
        self._absorb()

    @rule(mode=st.sampled_from(["running", "stopped"]), delay=st.sampled_from([0, 4, 12]))
    def dispatcher(self, mode: str, delay: int) -> None:
        self.b.set_dispatcher_saving(self.now, "sql2", mode, delay)
        self._absorb()

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def lose(self, data: st.DataObject) -> None:
        dialog, _, seq = data.draw(st.sampled_from(sorted(self.sent)))
        self.b.lose_in_transit(self.now, dialog, seq + 1, False)

    @rule(forwarding=st.booleans())
    def forwarding(self, forwarding: bool) -> None:
        self.b.set_message_forwarding(self.now, "sql5", forwarding)

    @rule(ms=st.integers(0, 40_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.b.advance(self.now)
        self._absorb()

    def _waiting(self) -> Counter[Msg]:
        rows = (
            self.b.router.transmission_rows()
            + self.b.router.transmission_rows(forwarded=True)
            + [r for d in self.b.dispatchers.values() for r in d.rows()]
        )
        return Counter((str(r["dialog"]), bool(r["from_target"]), int(str(r["message_sequence_number"]))) for r in rows)

    @invariant()
    def every_message_is_in_exactly_one_place(self) -> None:
        places = Counter(self.arrived) + self.gone + self._waiting()
        assert places == self.sent, f"sent {dict(self.sent)}, found {dict(places)}"

    @invariant()
    def conversations_arrive_in_order(self) -> None:
        for dialog in self.dialogs:
            seqs = [s for d, _, s in self.arrived if d == dialog]
            assert seqs == sorted(seqs), f"{dialog} arrived out of order: {seqs}"


RoutingMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestRouting = RoutingMachine.TestCase


class _ForgetsSilently(TransmissionQueue):
    """Lets a message that waits away from its origin vanish without a word."""

    def _wait(self, env: Any, at: Any, inside: bool, home: str | None, status: str, address: str | None = None) -> Any:
        waiting = super()._wait(env, at, inside, home, status, address)
        if not inside:
            self.lines[(env.dialog, env.from_target)].remove(waiting)
        return waiting


class _DeliversTwice(Routing):
    def _local(self, *args: object, **kwargs: object) -> None:
        super()._local(*args, **kwargs)  # type: ignore[arg-type]
        super()._local(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("room", [_ForgetsSilently, _DeliversTwice], ids=lambda r: r.__name__)
def test_the_properties_catch_a_wrong_router(room: type[Room]) -> None:
    broker = type("WrongBroker", (Broker,), {"router_class": router_with(room)})
    machine = type("WrongMachine", (RoutingMachine,), {"broker_class": broker})
    assert_machine_fails(machine)
