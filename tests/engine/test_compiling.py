"""The optional mypyc build: its modules (sbtck/engine/compiling.py), and its decorators in plain Python.

Whether the compiled build behaves as plain Python is CI's
scripts/check-compiled.sh: the engine's, the variants' and the stage's tests
and the suite, run on a compiled copy.
"""

from __future__ import annotations

from pathlib import Path

import sbtck
from sbtck.engine import compiling

KIT = Path(sbtck.__file__).parent
ENGINE = KIT / "engine"


def test_every_module_of_the_engine_is_compiled_but_the_list_itself_and_the_package() -> None:
    modules = {f"sbtck.engine.{p.stem}" for p in ENGINE.glob("*.py")} - {"sbtck.engine.__init__", compiling.__name__}
    assert modules <= set(compiling.COMPILED_MODULES), sorted(modules - set(compiling.COMPILED_MODULES))


def test_every_listed_module_is_a_source_file_of_the_kit() -> None:
    # the build names files, setup.py derives their paths from these names
    for name in compiling.COMPILED_MODULES:
        assert KIT.joinpath(*name.split(".")[1:]).with_suffix(".py").is_file(), name


def test_the_decorators_leave_a_class_as_it_is_in_plain_python() -> None:
    class Part:
        pass

    assert compiling.trait(Part) is Part
    assert compiling.mypyc_attr(allow_interpreted_subclasses=True)(Part) is Part
