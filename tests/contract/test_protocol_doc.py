"""docs/protocol.md states every command and event kind of the contract, as the contract has it today."""

from __future__ import annotations

import json

from sbtck import contract
from sbtck.iut.protocol_doc import EXAMPLES, render
from tests.helpers import ROOT

DOC = ROOT / "docs" / "protocol.md"


def test_the_document_lists_every_command_as_generated_from_the_contract() -> None:
    assert {type(e) for e in EXAMPLES} == set(contract.COMMANDS.values())
    assert DOC.read_text().endswith(render()), "regenerate: python -m sbtck.iut.protocol_doc"


def test_every_example_in_the_document_is_a_valid_command() -> None:
    for example in EXAMPLES:
        assert contract.command_from_json(json.loads(json.dumps(example.to_json()))) == example


def test_the_implementers_guide_names_every_capability_parameter_and_view() -> None:
    from sbtck import catalogue

    guide = (ROOT / "docs" / "implementing.md").read_text()
    missing = [
        name for name in (*contract.CAPABILITIES, *catalogue.load().params, *contract.VIEWS) if f"`{name}`" not in guide
    ]
    assert missing == []
    for link in ("protocol.md", "steps.md", "protocol.md#events"):
        assert f"]({link})" in guide and (ROOT / "docs" / link.split("#")[0]).exists()


def test_the_document_is_titled_with_the_version_the_kit_speaks() -> None:
    # both clean-room authors met a title one minor version behind the hello example (tests/cleanroom/*/NOTES.md)
    assert DOC.read_text().splitlines()[0] == f"# The sbtck protocol, version {contract.PROTOCOL_VERSION}"
