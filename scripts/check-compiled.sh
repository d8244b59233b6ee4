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
# What the compiled build must show, and no more (every other test runs on the plain build in scripts/test.sh):
# the engine's own tests; the same trace as the plain engine in the reference's 3,040 worlds (test_trace_hashes,
# the strongest sameness check there is); the stage's check of the reference and of each allowed variant's worlds
# (test_worlds: the search drives the compiled rooms through a chooser written in Python); Spark's local runs,
# which pickle the compiled classes to its workers (a standalone cluster tests Spark's plumbing, not the build);
# the Gherkin suite; and a day's sample of the wrong variants as black boxes, whose overrides are interpreted
# subclasses of the compiled rooms and must take effect (an allowed variant would pass whether or not they do).
# The search, the shrinker and the reports are not compiled, so their tests prove nothing more here.
.venv/bin/python -m pytest -p no:cacheprovider -q -n 2 --dist loadgroup tests/engine steps \
  tests/workloads/test_trace_hashes.py tests/workloads/test_worlds.py tests/workloads/test_spark.py \
  tests/variants/test_wrong_variants.py \
  --deselect=tests/workloads/test_spark.py::test_a_standalone_cluster_gives_the_same_parquet_as_local \
  "--deselect=tests/variants/test_wrong_variants.py::test_variant_fails_a_scenario[" \
  || fail "a test on the compiled build"
# the sweep runs a day's sample of its values (tests/sampling.py): every value is collected, so these two exist
sweep=tests/variants/test_open_values.py::test_the_suite_passes_on_the_reference_with_the_value
SBTCK_TEST_SAMPLE=all .venv/bin/python -m pytest -p no:cacheprovider -q "$sweep[activation_empty_window_s=4.5-tuned]" \
  "$sweep[delayed_retry_s=20.5-tuned]" || fail "an open value on the compiled build"
say "all green"
