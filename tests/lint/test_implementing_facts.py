"""The facts docs/implementing.md states about the engine's conventions are the engine's: a change to one fails here."""

from __future__ import annotations

import re

from sbtck.contract import BROKER_CONFIGURATION_NOTICE, TRANSPORT
from sbtck.engine.broker import FIRST_USER_SPID
from sbtck.engine.periodic import SCHEDULE
from sbtck.engine.transmission import transport_address
from sbtck.topology import Procedure
from tests.helpers import ROOT

GUIDE = " ".join((ROOT / "docs" / "implementing.md").read_text().split())


def test_the_timer_task_names_are_the_schedules_in_its_order() -> None:
    said = GUIDE[GUIDE.index("in this order and named so:") :]
    names = re.findall(r"`([a-z -]+)`", said[: said.index("(every 5th)")])
    assert names == [task.name for task in SCHEDULE]
    for every in (1, 2, 5):  # each group's multiple, as the list says
        group = [t.name for t in SCHEDULE if t.every == every]
        assert said.index(f"`{group[-1]}`") < said.index(
            {1: "(every notification)", 2: "(every 2nd)", 5: "(every 5th)"}[every]
        )


def test_the_conventions_stated_are_the_engines() -> None:
    assert f"a number from {FIRST_USER_SPID}, the first user SPID" in GUIDE
    assert f"`{BROKER_CONFIGURATION_NOTICE}`" in GUIDE.replace("` `", "")
    assert f"`address` is `{TRANSPORT}`" in GUIDE
    assert transport_address("TCP://sql2.example:4022/Orders") == "TCP://sql2.example:4022"
    assert "the service `TCP://sql2.example:4022/Orders` gives `TCP://sql2.example:4022`" in GUIDE
    assert transport_address("Orders") is None
    unsaid = Procedure("p")  # a procedure the topology says nothing of
    assert f"`TOP (receive_top)` (default {unsaid.receive_top})" in GUIDE
    assert f"works `work_ms` (default {unsaid.work_ms:g})" in GUIDE
    assert unsaid.receives and "`receives: true` (the default)" in GUIDE
