"""A fact the kit relies on is written in one place (issue 35): what a topology leaves unsaid is the default of
its struct's field (sbtck/topology.py), which the loader, the engine's builder and the stage leave to it; the values the
documents fix are the catalogue's (spec/rules.yaml), the open values the reference chose are its profile's
(sbtck/engine/profile.yaml), and docs/implementing.md shows both as generated from them. The loader, the engine
and the stage are held to it."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import msgspec
import yaml

from sbtck import catalogue, topology
from sbtck.engine.params import PROFILE_PATH, EngineParams
from tests.helpers import ROOT
from tests.lint.test_topology_typed import keyed_gets

# the names a topology default goes by in the topology's form, its file (work_s, auto_created_local) and the engine's
# model (forwarding)
DEFAULTED = {
    field.name
    for form in topology.FORMS
    for field in msgspec.structs.fields(form)
    if field.default is not msgspec.NODEFAULT or field.default_factory is not msgspec.NODEFAULT
} | {"work_s", "auto_created_local", "forwarding"}


def _written(path: Path) -> list[str]:
    """The places in PATH that write a default of a topology name as a literal."""
    found = []
    tree = ast.parse(path.read_text())
    for call in keyed_gets(tree, DEFAULTED):
        key, default = call.args
        if isinstance(key, ast.Constant) and isinstance(default, ast.Constant) and default.value is not None:
            found.append(f"{path.name}:{call.lineno}: .get({key.value!r}, {default.value!r})")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in DEFAULTED
            and isinstance(node.value, ast.Constant)
            and node.value.value is not None
        ):
            found.append(f"{path.name}:{node.lineno}: {node.target.id} = {node.value.value!r}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            for arg, default in zip(args, node.args.defaults, strict=True):
                if arg.arg in DEFAULTED and isinstance(default, ast.Constant) and default.value is not None:
                    found.append(f"{path.name}:{node.lineno}: {arg.arg}={default.value!r}")
    return found


# the folders that read a topology or the catalogue's values: the loader, the engine and the stage
READERS = ("fixtures", "engine", "workloads")


def _places() -> list[Path]:
    return [path for folder in READERS for path in sorted((ROOT / folder).glob("*.py"))]


def test_a_topology_default_is_written_only_in_its_form() -> None:
    found = [hit for path in _places() for hit in _written(path)]
    assert {"receives", "cpus", "master_key", "status", "address"} <= DEFAULTED
    assert found == [], "leave it to the field's default in sbtck/topology.py instead:\n" + "\n".join(found)


def _repeated(path: Path, fixed: dict[str, float]) -> list[str]:
    """The module constants of PATH that write a fixed value of the catalogue as a number: one named with a word of
    the parameter's name (TIMER_MS, timer_period_s) holding its value in the constant's unit."""
    found = []
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Constant):
            continue
        if not isinstance(value.value, int | float) or isinstance(value.value, bool):
            continue
        *words, unit = target.id.lower().split("_")
        scale = {"ms": 1000, "s": 1}.get(unit)
        for name, seconds in fixed.items():
            if scale and set(words) & set(name.split("_")[:-1]) and value.value == seconds * scale:
                found.append(f"{path.name}:{node.lineno}: {target.id} = {value.value!r} ({name})")
    return found


def test_a_fixed_value_of_the_documents_is_read_from_the_catalogue() -> None:
    fixed = {
        name: float(p.value)
        for name, p in catalogue.load().params.items()
        if p.fixed and name.endswith("_s") and isinstance(p.value, int | float)
    }
    assert "timer_period_s" in fixed
    found = [hit for path in _places() for hit in _repeated(path, fixed)]
    assert found == [], "read it from sbtck.catalogue instead:\n" + "\n".join(found)


def test_a_parameter_value_is_the_catalogues_or_the_profiles_only() -> None:
    fixed = {name for name, p in catalogue.load().params.items() if p.fixed}
    # the engine's parameters have no values of their own; resend_after_s's 0 says "never", principal_retry_s's 0 "at
    # the 2nd notifications", no value of a document
    defaults = {f.name: f.default for f in dataclasses.fields(EngineParams) if f.default is not dataclasses.MISSING}
    assert defaults == {"resend_after_s": 0, "principal_retry_s": 0}
    # the reference's profile declares what it chose, never what the documents fix
    declared = set(yaml.safe_load(PROFILE_PATH.read_text())["params"])
    assert declared and not declared & fixed, declared & fixed
    # and the engine runs the catalogue's fixed values with the profile's open ones
    reference = EngineParams.reference()
    for name in fixed:
        assert getattr(reference, name) == catalogue.load().params[name].value


def test_the_guide_shows_the_parameters_as_the_catalogue_has_them() -> None:
    from sbtck.catalogue_doc import PARAMETERS_BEGIN, PARAMETERS_END, parameters

    guide = (ROOT / "docs" / "implementing.md").read_text()
    assert PARAMETERS_BEGIN in guide and PARAMETERS_END in guide
    inside = guide.split(PARAMETERS_BEGIN, 1)[1].split(PARAMETERS_END, 1)[0]
    assert inside == parameters(), "regenerate: python -m sbtck.catalogue_doc"
    # outside the generated table, no parameter is given a number
    outside = guide.replace(inside, "")
    given = [name for name in catalogue.load().params if re.search(rf"`{name}` \(\d", outside)]
    assert given == [], f"docs/implementing.md gives {given} a number of its own: the table has it"
