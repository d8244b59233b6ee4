#!/usr/bin/env bash
# Copies the checkout's sources into DEST (made if missing), without what a
# build, a run or a developer leaves beside them: the virtual environment,
# git, outputs, setuptools' build/ (it keeps modules deleted since, and would
# ship them), caches and compiled modules built in place. Through tar, so the
# links sbtck/engine -> ../engine stay links.
#
#     bash scripts/clean-copy.sh DEST
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash scripts/clean-copy.sh DEST" >&2; exit 2; }
mkdir -p "$1"
cd "$(dirname "$0")/.."
tar -c --exclude=.venv --exclude=.git --exclude=out --exclude=build --exclude=dist --exclude='*.egg-info' \
  --exclude=__pycache__ --exclude='.*_cache' --exclude=.hypothesis --exclude='*.so' . | tar -x -C "$1"
