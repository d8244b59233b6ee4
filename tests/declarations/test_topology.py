"""Topology files are refused at once, with the file, the line, the key and what to change."""

from __future__ import annotations

import re

import pytest

from sbtck.errors import DeclarationError, TopologyError
from sbtck.fixtures import topology
from sbtck.topology import plain

GOOD = """\
instances:
  sql1:
    address: TCP://sql1.example:4022
    databases:
      shop:
        procedures:
          p: {receive_top: 1, waitfor_s: 2, work_s: 0.5}
        queues:
          Q:
            activation: {status: ON, procedure_name: p, max_queue_readers: 2}
          R: {}
        services:
          S: {queue: Q}
        event_notifications:
          N: {queue: R}
"""


def test_a_good_topology_becomes_the_contract_form() -> None:
    topo = topology.parse(GOOD, "good.yaml")
    db = plain(topo.plain)["instances"][0]["databases"][0]
    assert db["queues"][0] == {
        "name": "Q",
        "activation": {"status": "ON", "procedure_name": "p", "max_queue_readers": 2},
    }
    assert db["procedures"][0] == {"name": "p", "receives": True, "receive_top": 1, "waitfor_ms": 2000, "work_ms": 500}
    assert db["event_notifications"] == [{"name": "N", "queue": "R", "event": "QUEUE_ACTIVATION"}]
    assert len(db["broker_instance"]) == 36
    assert topo.queue("Q").queue == "Q"
    assert topo.queue("shop.Q").database == "shop"
    assert topo.service("S") == ("sql1", "shop", "S")


def test_every_shipped_topology_loads() -> None:
    for path in topology.TOPOLOGY_DIR.glob("*.yaml"):
        topology.named(path.stem)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "max_queue_readers: 2",
            "max_readers: 2",
            "good.yaml:10: instances.sql1.databases.shop.queues.Q.activation."
            "max_readers: unknown key 'max_readers'; did you mean 'max_queue_readers'?",
        ),
        ("max_queue_readers: 2", "max_queue_readers: two", "expected a whole number >= 0, got 'two'"),
        ("max_queue_readers: 2", "max_queue_readers: -1", "expected a whole number >= 0, got -1"),
        ("status: ON", "status: MAYBE", "activation.status: expected ON or OFF, got 'MAYBE'"),
        ("procedure_name: p,", "procedure_name: q,", "no procedure 'q' under procedures: of database 'shop'"),
        ("status: ON, procedure_name: p,", "status: ON,", "STATUS = ON needs a procedure_name"),
        (
            "S: {queue: Q}",
            "S: {queue: X}",
            "good.yaml:13: instances.sql1.databases.shop.services.S.queue: no queue 'X'",
        ),
        ("S: {queue: Q}", "S: {}", "services.S: missing required key 'queue'"),
        ("N: {queue: R}", "N: {queue: R, event: BROKER_QUEUE_DISABLED}", "only QUEUE_ACTIVATION is known"),
        ("TCP://sql1.example:4022", "sql1:4022", "address: expected a network address such as TCP://host:4022"),
        ("waitfor_s: 2", "waitfor_s: -2", "waitfor_s: expected a number >= 0, got -2"),
        ("      shop:\n", "      shop:\n        broker_instance: not-a-guid\n", "expected a GUID"),
        (
            "          R: {}\n",
            "          R: {}\n          R: {}\n",
            "the key 'R' is given twice in the same mapping (line 11 first)",
        ),
        ("          R: {}\n", "          R: [\n", "good.yaml:13: not valid YAML"),
        ("  sql1:", "  1sql:", "'1sql' is not a name"),
    ],
)
def test_a_bad_topology_is_refused_with_a_message_naming_the_place(old: str, new: str, message: str) -> None:
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    with pytest.raises(DeclarationError) as caught:
        topology.parse(text, "good.yaml")
    assert message in str(caught.value)


def test_an_empty_file_or_no_instance_is_refused() -> None:
    with pytest.raises(DeclarationError, match="the file is empty"):
        topology.parse("", "empty.yaml")
    with pytest.raises(DeclarationError, match="declare at least one instance"):
        topology.parse("instances: {}", "none.yaml")


def test_an_unknown_topology_name_lists_the_known_ones() -> None:
    with pytest.raises(TopologyError, match=r'no topology "nope" .*known: .*activation'):
        topology.named("nope")


def test_names_that_are_unknown_or_ambiguous_are_explained() -> None:
    topo = topology.parse(GOOD + "      other:\n        queues: {Q: {}}\n", "two.yaml")
    with pytest.raises(TopologyError, match=re.escape("queue 'Q' is ambiguous; name it as 'shop.Q' or 'other.Q'")):
        topo.queue("Q")
    with pytest.raises(TopologyError, match=re.escape("no queue 'Nope'; declared: other.Q, shop.Q, shop.R")):
        topo.queue("Nope")


ROUTED = """\
instances:
  sql1:
    address: TCP://sql1:4022
    databases:
      shop:
        routes:
          R: {service_name: S, address: "TCP://sql2:4022"}
  sql2:
    address: TCP://sql2:4022
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('address: "TCP://sql2:4022"}', 'address: "sql2"}', "route R: 'sql2' is not 'LOCAL', 'TRANSPORT' or a network"),
        ('address: "TCP://sql2:4022"}', 'address: "TCP://sql9:4022"}', "route R: TCP://sql9:4022 names no instance"),
        (
            'address: "TCP://sql2:4022"}',
            'address: LOCAL, mirror_address: "TCP://sql2:4022"}',
            "route R: a MIRROR_ADDRESS needs a network ADDRESS, and ADDRESS is 'LOCAL'",
        ),
        ('address: "TCP://sql2:4022"}', 'address: "TCP://sql2:4022", lifetime_s: 0}', "a lifetime in the past"),
        (
            'address: "TCP://sql2:4022"}',
            'address: "TCP://sql2:4022", broker_instance: nope}',
            "broker_instance: route R: expected a GUID",
        ),
        ('address: "TCP://sql2:4022"}', 'adress: "TCP://sql2:4022"}', "unknown key 'adress'; did you mean 'address'?"),
        (
            "address: TCP://sql2:4022\n",
            "address: TCP://sql2:4022\n    message_forwarding: SOMETIMES\n",
            "message_forwarding: expected ON or OFF",
        ),
    ],
)
def test_a_bad_route_is_refused_naming_the_route_and_the_problem(old: str, new: str, message: str) -> None:
    text = ROUTED.replace(old, new, 1)
    assert text != ROUTED
    with pytest.raises(DeclarationError) as caught:
        topology.parse(text, "routes.yaml")
    assert message in str(caught.value)
    assert "routes.yaml:" in str(caught.value)


def test_every_database_and_msdb_start_with_auto_created_local() -> None:
    sql1, sql2 = topology.parse(ROUTED, "r.yaml").plain.instances
    assert [r.name for r in sql1.databases[0].routes] == ["AutoCreatedLocal", "R"]
    assert [r.name for r in sql2.msdb_routes] == ["AutoCreatedLocal"]


def test_a_mirroring_pair_needs_a_principal_and_a_mirror() -> None:
    guid = "00000000-0000-0000-0000-000000000001"
    text = f"""\
instances:
  a: {{databases: {{d: {{broker_instance: {guid}, mirroring_role: principal}}}}}}
  b: {{databases: {{d: {{broker_instance: {guid}, mirroring_role: principal}}}}}}
"""
    with pytest.raises(DeclarationError, match="a mirroring pair is one principal and one mirror"):
        topology.parse(text, "m.yaml")
    topology.parse(
        text.replace("principal}}}}\n", "mirror}}}}\n", 1).replace(
            "b: {databases: {d: {broker_instance: " + guid + ", mirroring_role: principal",
            "b: {databases: {d: {broker_instance: " + guid + ", mirroring_role: mirror",
        ),
        "m.yaml",
    )
