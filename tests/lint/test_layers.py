"""Layers only look down: the import graph between the kit's packages has no cycle.

A node is a subpackage of ``sbtck`` (``engine``, ``iut``, ``steps``, ...) or one
module at the package's top (``sbtck.contract``, ``sbtck.cli``, ...). Imports
inside functions count as well: a cycle hidden in a function is still a cycle.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import sbtck

PACKAGE = Path(sbtck.__file__).resolve().parent


def modules() -> Iterator[tuple[str, Path]]:
    # the checkout's subpackages are symbolic links, which Path.rglob does not follow before 3.13
    found = [Path(top, name) for top, _, names in os.walk(PACKAGE, followlinks=True) for name in names]
    for path in sorted(p for p in found if p.suffix == ".py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(("sbtck", *parts)), path


KNOWN = dict(modules())


def node(module: str) -> str:
    """The layer a module belongs to."""
    parts = module.split(".")
    if len(parts) == 1:
        return "sbtck"
    if (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return f"sbtck.{parts[1]}"


def imported(module: str, path: Path) -> Iterator[str]:
    for statement in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(statement, ast.Import):
            yield from (alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
            for alias in statement.names:
                # `from sbtck import contract` imports a module; `from sbtck import __version__` the package
                whole = f"{statement.module}.{alias.name}"
                yield whole if whole in KNOWN else statement.module


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in KNOWN.items():
        source = node(module)
        for target in imported(module, path):
            if target.split(".")[0] == "sbtck" and node(target) != source:
                graph.setdefault(source, set()).add(node(target))
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph, as the list of its nodes, or None."""
    done: set[str] = set()

    def visit(at: str, path: list[str]) -> list[str] | None:
        if at in path:
            return [*path[path.index(at) :], at]
        if at in done:
            return None
        for target in sorted(graph.get(at, ())):
            found = visit(target, [*path, at])
            if found:
                return found
        done.add(at)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_the_package_graph_has_no_cycle() -> None:
    graph = edges()
    found = cycle(graph)
    assert found is None, "import cycle between the kit's layers: " + " -> ".join(found or [])


def test_the_engine_stands_on_the_contract_the_observations_and_the_errors_only() -> None:
    # the reference engine is one implementation among others: it may not know the harness; it reads the catalogue
    # for the values the documents fix, which are nobody's choice, and the contract's parts (design.md, 1)
    allowed = {
        *("sbtck.contract", "sbtck.topology", "sbtck.observations", "sbtck.views"),
        *("sbtck.errors", "sbtck.catalogue", "sbtck.resources"),
    }
    assert edges().get("engine", set()) <= allowed


def test_siblings_are_imported_by_their_own_names() -> None:
    # a name re-exported by the package's __init__ would tie a module to the whole package it is part of
    offenders = [
        f"{path.name}:{statement.lineno} {alias.name}"
        for module, path in KNOWN.items()
        if module.count(".") >= 2 and path.name != "__init__.py"
        for statement in ast.walk(ast.parse(path.read_text()))
        if isinstance(statement, ast.ImportFrom) and statement.module == module.rsplit(".", 1)[0]
        for alias in statement.names
        if f"{statement.module}.{alias.name}" not in KNOWN
    ]
    assert offenders == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None
