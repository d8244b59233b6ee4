#!/usr/bin/env bash
# Proves the optional mypyc build (scripts/compile.sh): compiles a clean copy
# of the checkout, checks that every module of sbtck/engine/compiling.py is
# compiled there, and runs on it the engine's, the variants' and the workload
# stage's tests and the Gherkin suite. PYTHONPATH names the copy, so that the
# pytest runs those tests start in other folders import it too.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'check-compiled: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

if ! command -v cc >/dev/null; then
  say "installing gcc: mypyc builds C extensions"
  [ "$(id -u)" = 0 ] || fail "no C compiler, and not root to install gcc"
  [ -f /tmp/.sbtck-apt-updated ] || { apt-get update -qq && touch /tmp/.sbtck-apt-updated; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null || fail "apt-get install gcc"
fi

work=$(mktemp -d /tmp/sbtck-compiled.XXXXXX)
trap 'rm -rf "$work"' EXIT
bash scripts/clean-copy.sh "$work"
ln -s "$PWD/.venv" "$work/.venv"
cd "$work"
bash scripts/compile.sh || fail "the mypyc build"
export PYTHONPATH=$work
.venv/bin/python -c '
import sbtck
from sbtck.engine.compiling import COMPILED_MODULES, compiled_modules
assert sbtck.__file__.startswith("'"$work"'"), sbtck.__file__
assert compiled_modules() == list(COMPILED_MODULES), compiled_modules()
' || fail "the tests would not run the compiled modules"
say "the tests on the compiled build"
# the outside brokers run no engine, and the sweep of open values runs the same engine code some 300 times:
# two of its values (a half second each) prove the compiled engine takes them. The allowed variants pass on the
# compiled build whether or not their overrides take effect there (they would pass as the reference does), so they
# prove nothing of it; the wrong variants do, failing only where their overrides act. A standalone Spark cluster
# tests Spark's plumbing, which the local runs of test_spark already take through the compiled modules
.venv/bin/python -m pytest -p no:cacheprovider -q -n 2 --dist loadgroup tests/engine tests/variants tests/workloads steps \
  --ignore=tests/variants/test_independent.py --ignore=tests/variants/test_independent_stage.py \
  --deselect=tests/variants/test_open_values.py --ignore=tests/variants/test_allowed_behaviours.py \
  --deselect=tests/workloads/test_spark.py::test_a_standalone_cluster_gives_the_same_parquet_as_local \
  || fail "a test on the compiled build"
# the sweep runs a day's sample of its values (tests/sampling.py): every value is collected, so these two exist
sweep=tests/variants/test_open_values.py::test_the_suite_passes_on_the_reference_with_the_value
SBTCK_TEST_SAMPLE=all .venv/bin/python -m pytest -p no:cacheprovider -q "$sweep[activation_empty_window_s=4.5-tuned]" \
  "$sweep[delayed_retry_s=20.5-tuned]" || fail "an open value on the compiled build"
say "all green"
