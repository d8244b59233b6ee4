#!/usr/bin/env bash
# Proves the installable kit: builds the wheel, checks that its only top-level
# names are sbtck and its .dist-info, installs it with the spark extra into a
# new virtual environment outside the checkout, and from an empty folder runs
# the whole suite (every scenario must pass), a small workload (twice: the second
# maps the Spark classes the first kept), a plain project of its own beside it
# and the example user project, installed as its README says; then installs PyPI's fixtures and reports and a top-level steps
# package beside it, runs the suite again, uninstalls them and runs it once
# more. Prints the installed sizes of the core and the extras.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
say() { printf 'check-wheel: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

work=$(mktemp -d /tmp/sbtck-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
# built from a clean copy: setuptools' build/ keeps modules deleted since, and would ship them
bash scripts/clean-copy.sh "$work/src"
.venv/bin/python -m pip wheel -q --no-deps -w "$work/dist" "$work/src" >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log"; fail "pip wheel"; }
wheel=$(ls "$work"/dist/sbtck-*.whl) || fail "no wheel was built"
say "built $(basename "$wheel")"
# pure Python, whatever setup.py can compile when asked (SBTCK_MYPYC=1, scripts/compile.sh)
case "$wheel" in *-py3-none-any.whl) ;; *) fail "the wheel is not pure Python: $(basename "$wheel")" ;; esac

.venv/bin/python - "$wheel" <<'PY' || fail "the wheel's top-level names are not exactly sbtck and its .dist-info"
import sys, zipfile
tops = {name.split("/")[0] for name in zipfile.ZipFile(sys.argv[1]).namelist()}
dist = [t for t in tops if t.endswith(".dist-info")]
print(f"check-wheel: top-level names: {sorted(tops)}", file=sys.stderr)
sys.exit(not (len(dist) == 1 and tops == {"sbtck", *dist}))
PY

size() { du -sm "$1" | cut -f1; }
python3 -m venv "$work/bare"
python3 -m venv "$work/core"
"$work/core/bin/pip" install -q "$wheel" >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log"; fail "pip install the wheel"; }
say "installed size: bare venv $(size "$work/bare") MB, core $(size "$work/core") MB"
venv=$work/venv
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheel[spark]" >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log"; fail "pip install the wheel with the spark extra"; }
say "installed size: with the spark extra $(size "$venv") MB"

empty=$work/empty
mkdir "$empty"
cd "$empty"
"$venv/bin/sbtck" --version
"$venv/bin/python" -m sbtck --version >/dev/null

all_passed() {
  "$venv/bin/python" - "$1" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
statuses = [s["status"] for s in data["scenarios"]]
bad = [s["id"] for s in data["scenarios"] if s["status"] != "passed"]
print(f"check-wheel: {len(statuses)} scenarios, {len(bad)} not passed", file=sys.stderr)
sys.exit(bool(bad) or len(statuses) < 100)
PY
}

say "sbtck run from an empty folder"
"$venv/bin/sbtck" run --out report -- -q >"$work/run.log" 2>&1 || { tail -20 "$work/run.log"; fail "sbtck run"; }
all_passed report/results.json || fail "not every scenario passed"
# pytest's cache (--lf) is the only thing a run keeps in the current folder, beside the report
[ -z "$(find "$empty" -name '__pycache__')" ] || fail "sbtck run left __pycache__ in the current folder"
[ "$(ls -A "$empty" | sort | tr '\n' ' ')" = ".pytest_cache report " ] || fail "sbtck run left $(ls -A "$empty")"

say "a plain project beside the kit keeps its own exit status, and imports nothing of the kit"
mkdir "$work/plain"
printf 'import sys\n\ndef test_one():\n    assert not [m for m in sys.modules if m.startswith("sbtck.engine")]\n' \
  >"$work/plain/test_one.py"
(cd "$work/plain" && "$venv/bin/pytest" -q >"$work/plain.log" 2>&1) || { tail -20 "$work/plain.log"; fail "a plain project's pytest"; }

say "sbtck workload --worlds 20, then a run whose driver must map the classes the first kept"
# the class archive in the work folder, not the user's cache: each check's venv is a new one, with its own archive
export SBTCK_CACHE_DIR=$work/cache
"$venv/bin/sbtck" workload --worlds 20 --master 'local[2]' --out workload >"$work/workload.log" 2>&1 \
  || { tail -20 "$work/workload.log"; fail "sbtck workload"; }
test -s workload/summary.json || fail "the workload wrote no summary.json"
grep -q "kept in $work/cache/spark-classes/" "$work/workload.log" || { tail -5 "$work/workload.log"; fail "the first workload kept no class archive"; }
# -Xshare:on: a JVM that cannot map the archive refuses to start
JDK_JAVA_OPTIONS=-Xshare:on "$venv/bin/sbtck" workload --worlds 2 --master 'local[1]' --out workload2 >"$work/workload2.log" 2>&1 \
  || { tail -20 "$work/workload2.log"; fail "sbtck workload mapping the class archive"; }
unset SBTCK_CACHE_DIR

say "the example user project, installed and run with its README's commands"
cp -r "$repo/examples/user-project" project
"$venv/bin/pip" install -q -e project >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log"; fail "pip install -e the example project"; }
(cd project && "$venv/bin/pytest" -q --sbtck-out out >"$work/project.log" 2>&1) || { tail -20 "$work/project.log"; fail "pytest in the example project"; }
grep -q 'features/orders.feature::\[1\]' project/out/results.json || fail "the project's own scenario did not run"
all_passed project/out/results.json || fail "the example project"
(cd project && "$venv/bin/pytest" -q -m orders --sbtck-iut python:orders_broker:make --sbtck-out mine >"$work/project.log" 2>&1) \
  || { tail -20 "$work/project.log"; fail "the example project's own tag and python: implementation"; }
grep -q '"name": "orders broker"' project/mine/results.json || fail "the project's own implementation did not run"
(cd project && "$venv/bin/sbtck" run --features features --iut python:orders_broker:make >"$work/project.log" 2>&1) \
  || { tail -20 "$work/project.log"; fail "sbtck run --features in the example project"; }
grep -q "settings from $PWD/project/pyproject.toml" "$work/project.log" || fail "sbtck run did not name the project's settings"
test -s project/out/kit/results.json || fail "the project's [tool.sbtck] out was not used"

# PyPI's steps cannot be built here (its build needs PETSc), so a stand-in
# distribution installs a top-level steps package in its place.
say "PyPI's fixtures and reports, and a top-level steps package, installed beside the kit"
mkdir -p "$work/standin/steps"
printf 'raise ImportError("a stand-in for PyPI steps")\n' >"$work/standin/steps/__init__.py"
printf '[project]\nname = "steps-standin"\nversion = "1"\n[tool.setuptools]\npackages = ["steps"]\n' \
  >"$work/standin/pyproject.toml"
"$venv/bin/pip" install -q fixtures reports "$work/standin" >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log"; fail "pip install fixtures reports steps"; }
"$venv/bin/python" -c 'import fixtures, reports, sbtck.fixtures, sbtck.reports, sbtck.steps' || fail "imports beside them"
"$venv/bin/sbtck" run --out report2 -- -q >"$work/run2.log" 2>&1 || { tail -20 "$work/run2.log"; fail "sbtck run beside fixtures, steps, reports"; }
all_passed report2/results.json || fail "not every scenario passed beside fixtures, steps, reports"
"$venv/bin/pip" uninstall -q -y fixtures reports steps-standin || fail "pip uninstall"
"$venv/bin/sbtck" run --out report3 -- -q >"$work/run3.log" 2>&1 || fail "sbtck run after uninstalling fixtures, steps, reports"
all_passed report3/results.json || fail "not every scenario passed after uninstalling fixtures, steps, reports"
say "all green"
