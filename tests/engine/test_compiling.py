"""The optional mypyc build: its modules (sbtck/engine/compiling.py), and its decorators in plain Python.

Whether the compiled build behaves as plain Python is CI's
scripts/check-compiled.sh: the engine's, the variants' and the stage's tests
and the suite, run on a compiled copy.
"""

from __future__ import annotations

import os
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest

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


def _compiled_module(folder: Path, name: str, source_newer: bool) -> ModuleType:
    stem = name.rpartition(".")[2]
    built, source = folder / f"{stem}{EXTENSION_SUFFIXES[0]}", folder / f"{stem}.py"
    built.write_bytes(b"")
    source.write_text("")
    older, newer = 1_700_000_000, 1_700_000_100
    os.utime(built, (older, newer if not source_newer else older))
    os.utime(source, (older, newer if source_newer else older))
    module = ModuleType(name)
    module.__spec__ = ModuleSpec(name, ExtensionFileLoader(name, str(built)), origin=str(built))
    return module


def test_a_module_compiled_before_its_source_changed_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ("sbtck_test_fake.edited", "sbtck_test_fake.built_since", "sbtck_test_fake.not_imported")
    package = ModuleType("sbtck_test_fake")
    package.__path__ = [str(tmp_path)]
    monkeypatch.setitem(sys.modules, "sbtck_test_fake", package)
    monkeypatch.setitem(sys.modules, names[0], _compiled_module(tmp_path, names[0], source_newer=True))
    monkeypatch.setitem(sys.modules, names[1], _compiled_module(tmp_path, names[1], source_newer=False))
    assert compiling.stale_modules(names) == [names[0]]


def test_the_modules_this_process_runs_are_not_stale() -> None:
    """On plain Python nothing is compiled; on a build made from these sources (check-compiled.sh), nothing is old."""
    compiling.compiled_modules()  # imports every listed module
    assert compiling.stale_modules() == []


def test_a_stale_build_warns_and_says_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiling, "stale_modules", lambda: ["sbtck.engine.router"])
    with pytest.warns(RuntimeWarning, match=r"sbtck\.engine\.router.*scripts/compile\.sh"):
        compiling.warn_if_stale("sbtck.engine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiling.warn_if_stale("sbtck.workloads")  # each package warns of its own modules only
        monkeypatch.setattr(compiling, "stale_modules", list)
        compiling.warn_if_stale("sbtck.engine")


def _written_out(cls: type) -> bool:
    # the dataclasses module makes its __init__ by exec, from source that has no file; a compiled one has no code
    code = getattr(cls.__init__, "__code__", None)  # type: ignore[misc]
    return code is None or code.co_filename != "<string>"


def test_an_init_written_out_takes_its_dataclass_fields_in_order_with_their_defaults() -> None:
    """A field added to such a dataclass and not to its __init__ would be left unset, or set to a stale default."""
    import dataclasses
    import importlib
    import inspect

    checked = []
    for name in compiling.COMPILED_MODULES:
        for cls in vars(importlib.import_module(name)).values():
            if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == name):
                continue
            declared = not cls.__dataclass_params__.init  # type: ignore[attr-defined]
            assert _written_out(cls) == declared, f"{cls}: an __init__ written out says so with init=False, and only it"
            if not declared:
                continue
            checked.append(cls.__name__)
            if not hasattr(cls.__init__, "__code__"):
                continue  # compiled: no signature to read, and typed fields; the test on plain Python holds it
            fields = dataclasses.fields(cls)
            required = [f for f in fields if f.default is f.default_factory is dataclasses.MISSING]
            built = cls(*[object() for _ in required])
            assert all(hasattr(built, f.name) for f in fields), cls
            params = list(inspect.signature(cls.__init__).parameters.values())[1:]
            assert [p.name for p in params] == [f.name for f in fields], cls
            for f, p in zip(fields, params, strict=True):
                if f.default_factory is not dataclasses.MISSING:
                    assert p.default is None, (cls, f.name)  # None stands for a fresh one
                else:
                    want = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
                    assert p.default == want, (cls, f.name)
    assert {"Envelope", "Message", "Route", "Waiting", "_Due"} <= set(checked), checked
