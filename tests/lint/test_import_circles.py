"""No two modules of the kit import each other, however far round: no import circle in ``sbtck/``.

test_layers holds the packages to looking down; within a package a circle is as much of a knot, a module that
cannot be read (or tested) without the one that reads it. An import under ``TYPE_CHECKING`` or inside a function
counts: the circle is in the design whether or not Python meets it at import.
"""

from __future__ import annotations

from tests.lint.test_layers import KNOWN, imported


def graph() -> dict[str, set[str]]:
    """Each module of the kit, and the modules of the kit it imports (a package only when named itself)."""
    return {
        module: {target for target in imported(module, path) if target in KNOWN and target != module}
        for module, path in KNOWN.items()
    }


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == module:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


# circles kept, each with why
KEPT = {
    (
        "sbtck.engine.activation_room",
        "sbtck.engine.external_activation",
        "sbtck.engine.internal_activation",
        "sbtck.engine.monitor_checks",
    ): "the queue monitors' rooms hand a check, a procedure's exit and a time-out to one another, each holding the "
    "others by their classes (activation_room.py, for types only), as the Router's rooms do",
    (
        "sbtck.engine.forwarding",
        "sbtck.engine.room",
        "sbtck.engine.routing_attempt",
        "sbtck.engine.transmission",
        "sbtck.engine.transmission_queue",
        "sbtck.engine.transmitter",
    ): "the Router's rooms hand a message to one another, each holding the others by their classes (room.py, for "
    "types only): a protocol in their place is a slower call in the compiled build (sbtck/engine/compiling.py)",
}


def test_no_module_of_the_kit_imports_one_that_imports_it_back() -> None:
    found = [c for c in circles(graph()) if tuple(c) not in KEPT]
    assert found == [], "import circles (break each: a lower module for what both need):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_each_circle_kept_is_still_one() -> None:
    found = [tuple(c) for c in circles(graph())]
    assert [c for c in KEPT if c not in found] == [], "no longer a circle: take it out of KEPT"


def test_a_circle_is_found_however_far_round() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
