"""A step checks by raising the kit's errors, never by ``assert`` (issue 46, F10/F11).

An assert's failure is pytest's: its explanation of the expression (``assert []``, a Python list of dicts,
"Use -v to get more diff") and its frames of the fixture that ran the step stand before the kit's words, and
``python -O`` would drop the check altogether. A check raises CheckFailed or one of its kinds (sbtck/errors.py),
built as steps/differs.py builds them, and narrowing a type for mypy is a raise of the scenario's mistake too.
"""

from __future__ import annotations

import ast

from tests.helpers import ROOT


def test_no_step_module_asserts() -> None:
    modules = sorted((ROOT / "steps").glob("*.py"))
    # an empty or moved folder would pass with nothing read
    assert {"observe_steps.py", "periodic_steps.py", "routing_steps.py"} <= {path.name for path in modules}
    asserts = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert asserts == [], f"raise the kit's errors instead (steps/differs.py): {asserts}"
