"""One error hierarchy: every exception class of the kit lives in sbtck/errors.py, under SbtckError."""

from __future__ import annotations

import ast
import inspect

from sbtck import errors
from tests.lint.test_layers import KNOWN


def test_no_exception_class_outside_the_errors_module() -> None:
    elsewhere = [
        f"{module}.{statement.name}"
        for module, path in KNOWN.items()
        if module != "sbtck.errors"
        for statement in ast.walk(ast.parse(path.read_text()))
        if isinstance(statement, ast.ClassDef)
        and any(ast.unparse(base).endswith(("Error", "Exception", "Fault")) for base in statement.bases)
    ]
    assert elsewhere == []


def test_every_error_has_the_common_base_and_says_what_to_do() -> None:
    classes = [value for _, value in inspect.getmembers(errors, inspect.isclass) if value.__module__ == errors.__name__]
    assert sorted(cls.__name__ for cls in classes) == sorted(errors.__all__)
    for cls in classes:
        assert issubclass(cls, errors.SbtckError), cls
        assert cls.__doc__ and len(cls.__doc__) > 40, f"{cls.__name__} needs a docstring saying what to do"


def test_a_refusal_is_a_failure_and_a_fault_is_not() -> None:
    # the plugin decides failed versus error by AssertionError
    assert issubclass(errors.Refused, AssertionError)
    assert not issubclass(errors.ImplementationFault, AssertionError)
    assert not issubclass(errors.ScenarioError, AssertionError)
