#!/usr/bin/env bash
# Compiles the reference engine and the workload stage's hot modules with
# mypyc, in place, for a faster stage in this checkout (bench/ says how much).
# The kit stays pure Python everywhere else; `--clean` goes back to it.
# The list of modules: sbtck/engine/compiling.py.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'compile: %s\n' "$*" >&2; }

clean() {
  # every folder of the kit, whatever a list of modules compiled before named (not the environment's own)
  find . \( -path ./.venv -o -path ./.git \) -prune -o -name '*.so' -exec rm -f {} +
  rm -rf build
}

if [ "${1:-}" = "--clean" ]; then
  clean
  say "removed the compiled modules: the checkout runs as plain Python"
  exit 0
fi
[ $# -eq 0 ] || { say "usage: bash scripts/compile.sh [--clean]"; exit 2; }
[ -x .venv/bin/python ] || bash scripts/setup.sh
.venv/bin/python -c 'import mypyc' 2>/dev/null || { say "mypyc comes with mypy: install the dev extra (bash scripts/setup.sh)"; exit 1; }
command -v cc >/dev/null || { say "mypyc needs a C compiler: apt-get install gcc"; exit 1; }
clean
# build/ is setuptools' work folder: a stale one would bring back modules since removed
SBTCK_MYPYC=1 .venv/bin/python setup.py -q build_ext --inplace >build.log 2>&1 || { tail -30 build.log; say "FAILED (build.log)"; exit 1; }
rm -f build.log
# the runtime the modules share must sit inside the package (setup.py's group_name): at the top of the checkout,
# the editable install (.venv/bin/pytest, .venv/bin/sbtck) would not find it
if compgen -G './*.so' >/dev/null; then say "FAILED: a compiled module outside the package: $(ls ./*.so)"; exit 1; fi
.venv/bin/python -c '
from sbtck.engine.compiling import COMPILED_MODULES, compiled_modules
done = compiled_modules()
missing = sorted(set(COMPILED_MODULES) - set(done))
print(f"compile: {len(done)} of {len(COMPILED_MODULES)} modules compiled" + (f"; not: {missing}" if missing else ""))
raise SystemExit(bool(missing))
'
