"""A topology is decoded once, where it enters (sbtck/topology.py): the rest of the kit reads its structs' attributes,
and a default it leaves unsaid is the struct's field. A ``.get`` with a default on one of a topology's keys anywhere
else would be a second place deciding what a topology that says nothing means (issue 45, item 2)."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path

import msgspec

import sbtck
from sbtck import topology
from tests.helpers import ROOT

PACKAGE = Path(sbtck.__file__).resolve().parent
# the module that decodes a topology: the one place its defaults are applied
DECODING = PACKAGE / "topology.py"

# every key of a topology, in its form and in a topology file's
KEYS = frozenset(field.name for form in topology.FORMS for field in msgspec.structs.fields(form)) | {
    *("work_s", "waitfor_s", "auto_created_local", "dynamic_routing"),
}


# the reports read results.json, where a name or a status is a scenario's or an implementation's, never a topology's
NO_TOPOLOGY = PACKAGE / "reports"


def _sources() -> list[Path]:
    # the checkout's subpackages are symbolic links, which Path.rglob does not follow before 3.13
    found = [Path(top, name) for top, _, names in os.walk(PACKAGE, followlinks=True) for name in names]
    return sorted(
        p for p in found if p.suffix == ".py" and p.resolve() != DECODING.resolve() and NO_TOPOLOGY not in p.parents
    )


def keyed_gets(tree: ast.AST, keys: AbstractSet[str]) -> Iterator[ast.Call]:
    """The calls ``x.get(KEY, default)`` in TREE whose KEY is one of KEYS."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in keys
        ):
            yield node


def defaulted_gets(source: str, name: str) -> list[str]:
    """The calls ``x.get(KEY, default)`` in SOURCE whose KEY is a topology's."""
    return [f"{name}:{node.lineno}: {ast.unparse(node)}" for node in keyed_gets(ast.parse(source), KEYS)]


def test_no_topology_default_is_applied_outside_its_decoding() -> None:
    found = [hit for path in _sources() for hit in defaulted_gets(path.read_text(), str(path.relative_to(PACKAGE)))]
    assert found == [], (
        "read the decoded topology's attribute instead (sbtck/topology.py declares the default on its field):\n"
        + "\n".join(found)
    )


def test_the_check_sees_a_defaulted_get() -> None:
    source = "cpus = spec.get('cpus', 1)\nname = spec['name']\nrows = result.get('rows', [])\n"
    assert defaulted_gets(source, "x.py") == ["x.py:1: spec.get('cpus', 1)"]
    assert {"cpus", "receives", "status", "address", "work_s", "auto_created_local"} <= KEYS
    assert DECODING.parent == ROOT / "sbtck"
