#!/usr/bin/env bash
# The project's own tests: lint, types, the unit/property/end-to-end tests,
# and the Gherkin suite against the reference engine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
# loadgroup: the Spark tests share one session on one worker
# -rs: every skip says why in the summary
exec .venv/bin/pytest tests steps -n 2 --dist loadgroup -rs "$@"
