"""Every command of the contract survives JSON unchanged; bad JSON is refused by name."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sbtck import contract
from sbtck.errors import ContractError
from sbtck.observations import Kind
from sbtck.topology import Route, RouteChange, Topology

Q = contract.QueueRef("sql1", "shop", "Q")
EXAMPLES: list[contract.Command] = [
    contract.Start(1, Topology()),
    contract.AdvanceTime(2),
    contract.BeginDialog(3, "D1", "sql1", "shop", "Initiator", "Target"),
    contract.Send(4, "D1", "DEFAULT", "hello"),
    contract.BeginTransaction(5, "S1"),
    contract.Commit(6, "S1"),
    contract.Rollback(7, "S1"),
    contract.Receive(8, "S1", Q, top=1, where_dialog="D1", waitfor_ms=5000),
    contract.GetConversationGroup(9, "S1", Q, waitfor_ms=None),
    contract.AlterQueue(10, Q, status="ON", procedure_name="p", max_queue_readers=2),
    contract.CreateEventNotification(11, "N", Q),
    contract.DropEventNotification(12, "N", Q),
    contract.ExitProcedure(13, Q, 1),
    contract.CreateRoute(14, "sql1", "shop", Route("R", "S", address="LOCAL")),
    contract.AlterRoute(15, "sql1", None, RouteChange("R", address="TRANSPORT")),
    contract.DropRoute(16, "sql1", "shop", "R"),
    contract.AnswerRoutingRequest(17, "sql1", "shop", Route("D", "S", address="LOCAL")),
    contract.SetMessageForwarding(18, "sql1", True),
    contract.SetReachable(19, "sql2", False),
    contract.Failover(20, "sql4", "ledger"),
    contract.FailTaskHandlers(21, "sql1", 2),
    contract.SetDispatcherSaving(22, "sql2", "running", 6.0),
    contract.LoseInTransit(23, "D1", 0),
    contract.DropConnection(24, "sql1", "TCP://sql2:4022"),
    contract.FailTransmission(25, "D1", "resource"),
    contract.CreateMasterKey(26, "sql2", "vault"),
    contract.StopAckCleanup(27, "sql1", "shop"),
    contract.QueryView(28, "sys.routes", "sql1", None),
]


def test_every_command_kind_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == set(contract.COMMANDS.values())


@pytest.mark.parametrize("command", EXAMPLES, ids=lambda cmd: cmd.kind)
def test_a_command_round_trips_through_json(command: contract.Command) -> None:
    assert contract.command_from_json(json.loads(json.dumps(command.to_json()))) == command


@pytest.mark.parametrize("command", EXAMPLES, ids=lambda cmd: cmd.kind)
def test_a_commands_values_are_its_fields_with_the_defaults_filled_in(command: contract.Command) -> None:
    # what the reference runs a workload's JSON from, without building the command
    # the fields left at their defaults are left out, as a hand-written command leaves them out
    defaults = {f.name: f.default for f in dataclasses.fields(command)}
    written = {k: v for k, v in command.to_json().items() if k not in defaults or v != defaults[k]}
    assert contract.command_values(json.loads(json.dumps(written))) == {"kind": command.kind, **command.__dict__}


def test_the_reference_refuses_bad_json_as_the_contract_does() -> None:
    from sbtck.iut.reference import ReferenceImplementation

    bad = {"kind": "receive", "at_ms": 1, "session": "S", "queue": ["sql1", "shop", "Q"]}
    with pytest.raises(ContractError, match="queue is an object of instance, database, queue"):
        ReferenceImplementation().execute_json(bad)


def test_a_queue_is_written_as_an_object_of_its_three_names() -> None:
    """QueueRef is a named tuple, which JSON would write as a list; the protocol documents an object."""
    command = contract.Receive(1, "S1", contract.QueueRef("sql1", "shop", "TargetQueue"), top=1)
    assert command.to_json()["queue"] == {"instance": "sql1", "database": "shop", "queue": "TargetQueue"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"at_ms": 1}, "a command is an object with a 'kind'"),
        ({"kind": "explode", "at_ms": 1}, "unknown command kind 'explode'"),
        ({"kind": "send", "at_ms": 1, "dialog": "D1", "colour": "red"}, "command 'send' has no field(s) colour"),
        ({"kind": ["send"], "at_ms": 1}, "unknown command kind ['send']"),
        ({"kind": "send", "at_ms": 1}, "command 'send': missing field(s) dialog"),
        (
            {"kind": "receive", "at_ms": 1, "session": "S", "queue": {"instance": "i", "database": "d", "queu": "Q"}},
            "command 'receive': queue is an object of instance, database, queue",
        ),
        # a queue written as JSON writes a named tuple (a list), or as a name alone: refused here, where the
        # engine would fail on it with a TypeError that names no field
        ({"kind": "receive", "at_ms": 1, "session": "S", "queue": ["i", "d", "Q"]}, "queue is an object of"),
        ({"kind": "alter_queue", "at_ms": 1, "queue": "Q"}, "command 'alter_queue': queue is an object of"),
    ],
)
def test_bad_commands_are_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ContractError) as caught:
        contract.command_from_json(data)
    assert message in str(caught.value)


def test_an_event_round_trips() -> None:
    event = contract.Event(5, Kind.PROCEDURE_STARTED, {"task": 1, "queue": "Q"})
    assert contract.Event.from_json(json.loads(json.dumps(event.to_json()))) == event


def test_a_topology_or_a_route_of_the_wrong_form_is_refused_naming_its_field() -> None:
    with pytest.raises(
        ContractError, match=r"command 'start': topology: Expected `array`, got `int` - at `\$.instances`"
    ):
        contract.command_values({"kind": "start", "at_ms": 0, "topology": {"instances": 5}})
    route = {"name": "R", "address": "LOCAL", "lifetime_s": "soon"}
    with pytest.raises(ContractError, match=r"route: Expected `int \| float \| null`, got `str` - at `\$.lifetime_s`"):
        contract.command_values(
            {"kind": "create_route", "at_ms": 0, "instance": "sql1", "database": None, "route": route}
        )
    # what a command leaves unsaid is the struct's default, as the kit's own topologies write it
    said = contract.command_from_json({"kind": "start", "at_ms": 0, "topology": {"instances": [{"name": "SQL9"}]}})
    assert isinstance(said, contract.Start)
    assert said.topology.instances[0].address == "TCP://sql9:4022" and said.topology.instances[0].cpus == 1
