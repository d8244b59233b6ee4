"""The kit is pure Python; ``SBTCK_MYPYC=1`` compiles the reference engine and the stage's hot modules with mypyc.

Everything but that optional build (``bash scripts/compile.sh``) is declared
in pyproject.toml. The list of compiled modules lives in
sbtck/engine/compiling.py, read here without importing the kit.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from setuptools import setup

ext_modules = []
if os.environ.get("SBTCK_MYPYC") == "1":
    try:
        from mypyc.build import mypycify
    except ImportError:
        raise SystemExit("SBTCK_MYPYC=1 needs mypy where the kit is built: use bash scripts/compile.sh") from None
    here = Path(__file__).resolve().parent
    modules = runpy.run_path(str(here / "sbtck" / "engine" / "compiling.py"))["COMPILED_MODULES"]
    # the runtime all compiled modules share goes inside the package (sbtck/compiled__mypyc...), where every way of
    # importing the kit finds it, not beside it at the top level
    sources = [m.replace(".", "/") + ".py" for m in modules]
    ext_modules = mypycify(sources, opt_level="3", group_name="sbtck.compiled")

setup(ext_modules=ext_modules)
