#!/usr/bin/env bash
# The main job: the full conformance suite against the reference engine,
# writing out/report/index.html, junit.xml and results.json.
# Extra arguments go to `sbtck run` (for example --iut python:mod:factory).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/sbtck run --out out/report "$@"
