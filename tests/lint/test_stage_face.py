"""The stage (sbtck/workloads/) sees the reference engine only through its face: the package ``sbtck.engine`` (what
its __init__ exports) and the declaration of the choices the documents leave open (``sbtck.engine.choosing``), which
the search follows. Words the stage reads in a broker's reports (a route's LOCAL, transmission_status) are the
contract's and the views', so that it judges a stranger by what it was told, not by the reference's insides."""

from __future__ import annotations

from tests.lint.test_layers import KNOWN, imported

FACE = {"sbtck.engine", "sbtck.engine.choosing"}


def test_the_stage_imports_nothing_of_the_engine_but_its_face() -> None:
    found = [
        f"{module} imports {target}"
        for module, path in KNOWN.items()
        if module.startswith("sbtck.workloads.")
        for target in imported(module, path)
        if (target == "sbtck.engine" or target.startswith("sbtck.engine.")) and target not in FACE
    ]
    assert found == [], "import it from sbtck.engine (its face), or declare it in the contract:\n" + "\n".join(found)
