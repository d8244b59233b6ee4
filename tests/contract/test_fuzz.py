"""Random and malformed input against the adapters and the loaders (Hypothesis).

Whatever an implementation writes, the remote adapter answers with a
handshake, a response, or ImplementationFault: never another exception.
Whatever a declaration file holds, the loaders answer with data or a
DeclarationError whose message is one line.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbtck import contract
from sbtck.errors import ContractError, DeclarationError, ImplementationFault, ProtocolError
from sbtck.fixtures.topology import parse
from sbtck.fixtures.yamlfile import load as checked_yaml
from sbtck.iut import protocol
from sbtck.iut.profile import check
from sbtck.iut.remote import Channel, RemoteImplementation
from sbtck.topology import Topology

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
HELLO_KEYS = ("name", "version", "protocol", "capabilities", "params")
ANSWER_KEYS = ("id", "ok", "result", "error", "events")


def _shaped(keys: tuple[str, ...], fixed: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Objects with the right keys and values of any type: the shapes closest to right are the likeliest bugs."""
    return st.fixed_dictionaries({}, optional={k: json_values for k in keys}).map(
        lambda d: (json.dumps({**d, **fixed}) + "\n").encode()
    )


lines = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ") + b"\n"),
    json_values.map(lambda v: (json.dumps(v) + "\n").encode()),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n + b"\n"),
    st.integers(1, 400).map(lambda n: b'{"id": 1, "ok": true, "result": {"n": 1' + b"0" * n + b"}}\n"),
    _shaped(ANSWER_KEYS, {"id": 1}),
    _shaped(HELLO_KEYS, {}).map(lambda hello: b'{"id": 1, "ok": true, "result": ' + hello.strip() + b"}\n"),
    _shaped(ANSWER_KEYS, {"id": 2}),
    st.lists(json_values, max_size=3).map(
        lambda events: (json.dumps({"id": 2, "ok": True, "result": {}, "events": events}) + "\n").encode()
    ),
)


class _Script:
    """A channel that answers each request with the next scripted line."""

    description = "fuzzed implementation"
    max_line = 1 << 20

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = list(answers)

    def send(self, line: bytes, timeout_s: float) -> bool:
        return True

    def receive(self, timeout_s: float) -> bytes | None:
        return self.answers.pop(0) if self.answers else b""

    def ended(self) -> str:
        return "closed its output"

    def stderr_tail(self) -> str:
        return ""

    def close(self) -> None:
        pass


GOOD_HELLO = (
    json.dumps(
        {
            "id": 1,
            "ok": True,
            "result": {"name": "x", "protocol": contract.PROTOCOL_VERSION, "capabilities": ["routing"]},
        }
    )
    + "\n"
).encode()


@FUZZ
@given(line=lines)
def test_any_hello_answer_is_a_handshake_or_a_fault(line: bytes) -> None:
    remote = RemoteImplementation(lambda: cast(Channel, _Script([line])), timeout_s=0.1)
    try:
        handshake = remote.handshake()
    except ImplementationFault as fault:
        assert str(fault)
    else:
        assert isinstance(handshake, contract.Handshake) and handshake.name
        assert set(handshake.capabilities) <= set(contract.CAPABILITIES)


@FUZZ
@given(line=lines)
def test_any_execute_answer_is_a_response_or_a_fault(line: bytes) -> None:
    remote = RemoteImplementation(lambda: cast(Channel, _Script([GOOD_HELLO, line])), timeout_s=0.1)
    try:
        response = remote.execute(contract.Start(0, Topology()))
    except ImplementationFault as fault:
        assert str(fault)
    else:
        assert isinstance(response, contract.Response)
        assert all(isinstance(e.at_ms, int) and isinstance(e.kind, str) for e in response.events)


@FUZZ
@given(line=lines)
def test_any_request_line_is_decoded_or_refused(line: bytes) -> None:
    try:
        assert isinstance(protocol.decode(line), dict)
    except ProtocolError as refused:
        assert str(refused)


yaml_texts = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            [
                *("a: 1", "- x", "? [1]", ": 2", "&a x", "*a", "b: &b [1]", "c: *b", "!!python/object:os.system x"),
                *("d: .inf", "e: .nan", "f: {g: h}", "  i: j", "1: 2", "null: x", '"\\x01": 1', "k: !!binary AAAA"),
                *("implementation: {name: x}", "implementation: 5", "params: [1, 2]", "params: {delayed_retry_s: x}"),
                *("params: {forward_hop_limit: -1}", "capabilities: activation", "capabilities: [x]"),
                *("expected_failures: 5", "instances: 5", "instances: {sql1: 5}", "instances: {sql1: {cpus: x}}"),
                *("instances: {sql1: {databases: [1]}}", "instances: {sql1: {databases: {db: {queues: 5}}}}"),
                *("instances: {sql1: {address: 5, databases: {db: {routes: {r: {address: 7}}}}}}", "---"),
            ]
        ),
        max_size=12,
    ).map("\n".join),
    json_values.map(json.dumps),
)


def _one_line_or_data(load: Any, text: str) -> None:
    try:
        load(text)
    except DeclarationError as refused:
        assert str(refused) and "\n" not in str(refused), str(refused)


@FUZZ
@given(text=yaml_texts)
def test_any_yaml_is_data_or_a_one_line_refusal(text: str) -> None:
    _one_line_or_data(lambda t: checked_yaml(t, "fuzz.yaml"), text)


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, allow_unicode=True)


names = st.sampled_from(["sql1", "shop", "Q", "x"]) | st.text(max_size=5)
profiles = st.fixed_dictionaries(
    {},
    optional={
        "implementation": st.fixed_dictionaries({}, optional={"name": json_values, "version": json_values})
        | json_values,
        "params": st.dictionaries(st.sampled_from(["delayed_retry_s", "forward_hop_limit", "x"]), json_values)
        | json_values,
        "capabilities": st.lists(st.sampled_from([*contract.CAPABILITIES, "x"])) | json_values,
        "expected_failures": st.lists(st.text(max_size=10)) | json_values,
    },
)
topologies = st.recursive(
    json_values,
    lambda inner: st.dictionaries(
        st.sampled_from(["instances", "databases", "queues", "routes", "services", "address", "cpus", "activation"])
        | names,
        inner,
        max_size=4,
    ),
    max_leaves=25,
)


@FUZZ
@given(text=st.one_of(yaml_texts, profiles.map(_yaml)))
def test_any_profile_text_is_a_profile_or_a_one_line_refusal(text: str) -> None:
    def load(t: str) -> None:
        doc = checked_yaml(t, "profile.yaml")
        check(doc.data, "profile.yaml", doc.where)

    _one_line_or_data(load, text)


@FUZZ
@given(text=st.one_of(yaml_texts, topologies.map(_yaml)))
def test_any_topology_text_is_a_topology_or_a_one_line_refusal(text: str) -> None:
    _one_line_or_data(lambda t: parse(t, "topology.yaml"), text)


@pytest.mark.parametrize("depth", [50, 5000])
def test_deep_yaml_nesting_is_refused_in_one_line(depth: int) -> None:
    _one_line_or_data(lambda t: checked_yaml(t, "deep.yaml"), "[" * depth + "]" * depth)


@st.composite
def _commands(draw: st.DrawFn) -> dict[str, Any]:
    """A command of a known kind whose every field holds any JSON value: the closest to right are the likeliest."""
    kind = draw(st.sampled_from(sorted(contract.COMMANDS)))
    fields = sorted(contract.SHAPES[kind].names - {"kind"})
    return {"kind": kind, **draw(st.fixed_dictionaries({}, optional={f: json_values for f in fields}))}


@FUZZ
@given(command=_commands())
def test_a_clients_command_is_typed_or_refused_by_name(command: dict[str, Any]) -> None:
    """What sbtck serve takes from a client: a command of declared types, or a ContractError, never a TypeError."""
    try:
        built = contract.typed_command(command)
    except ContractError as refused:
        assert str(refused).startswith(f"command {command['kind']!r}")
    else:
        assert isinstance(built.at_ms, int) and not isinstance(built.at_ms, bool)
