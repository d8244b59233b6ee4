"""A mirrored route whose addresses ALTER ROUTE changes: what it learnt of the old pair is not carried to the new."""

from __future__ import annotations

from pathlib import Path

from sbtck.engine import Broker
from sbtck.fixtures import topology
from sbtck.observations import Kind
from sbtck.topology import Route, RouteChange

ROUTING = Path(topology.__file__).with_name("topologies") / "routing.yaml"


def _probes(b: Broker) -> list[tuple[str, str]]:
    kinds = (Kind.PRINCIPAL_PROBE, Kind.PRINCIPAL_LOST)
    return [(str(e.kind), str(e.fields["address"])) for e in b.drain_events() if e.kind in kinds]


def _route(address: str, mirror: str | None) -> Route:
    return Route("Pair", "Ledger", None, address, mirror, None)


def _change(address: str, mirror: str | None) -> RouteChange:
    return RouteChange("Pair", "Ledger", None, address, mirror, None)


def test_a_route_given_other_addresses_asks_its_new_pair_as_at_first_use() -> None:
    # RTR-2/RTR-3: the principal learnt is one of the route's two addresses ("o outro endereço do par" is the
    # route's); once ALTER ROUTE names another pair, the old principal is none of them and is not contacted
    b = Broker(topology.parse(ROUTING.read_text(), "routing").plain, 0)
    b.create_route(0, "sql1", "shop", _route("TCP://sql3.example:4022", "TCP://sql4.example:4022"))
    b.begin_dialog(0, "L1", "sql1", "shop", "Initiator", "Ledger")
    b.send(0, "L1")
    assert sorted(_probes(b)) == [
        (Kind.PRINCIPAL_PROBE, "TCP://sql3.example:4022"),
        (Kind.PRINCIPAL_PROBE, "TCP://sql4.example:4022"),
    ]
    b.alter_route(1000, "sql1", "shop", _change("TCP://sql5.example:4022", None))  # the mirror address stays
    b.send(2000, "L1")
    probes = _probes(b)
    assert "TCP://sql3.example:4022" not in {address for _, address in probes}, probes
    assert sorted(probes) == [
        (Kind.PRINCIPAL_PROBE, "TCP://sql4.example:4022"),
        (Kind.PRINCIPAL_PROBE, "TCP://sql5.example:4022"),
    ]


def test_a_route_whose_principal_stays_among_its_addresses_keeps_it() -> None:
    # the mirror address changed, the principal's did not: RTR-3 still sends to it without asking
    b = Broker(topology.parse(ROUTING.read_text(), "routing").plain, 0)
    b.create_route(0, "sql1", "shop", _route("TCP://sql3.example:4022", "TCP://sql4.example:4022"))
    b.begin_dialog(0, "L1", "sql1", "shop", "Initiator", "Ledger")
    b.send(0, "L1")
    _probes(b)
    b.alter_route(1000, "sql1", "shop", _change("TCP://sql3.example:4022", "TCP://sql5.example:4022"))
    b.send(2000, "L1")
    assert _probes(b) == []
