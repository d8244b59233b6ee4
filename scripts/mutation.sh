#!/usr/bin/env bash
# The suite's power: mutation testing of the reference engine (cosmic-ray), with the Gherkin suite as the test.
# Each mutant of engine/ is a broker with one small fault; the suite should fail on it. Not part of CI: the
# whole engine is thousands of mutants at a few seconds each. Mutants are made in a worktree of HEAD, never here.
#
#   bash scripts/mutation.sh [engine/MODULE.py ...]     (default: every module of engine/)
#   MUTATION_REV=COMMIT MUTATION_TAG=-before bash scripts/mutation.sh engine/router.py
#       mutates COMMIT's engine and keeps its session apart (out/mutation/router-before.sqlite), so that
#       a module's score before and after a change is measured with the same tool in the same way.
#   MUTATION_RESUME=1 ...    goes on with a session that was cut short instead of starting it again.
#
# Prints, per module, the mutants, how many the suite killed and the survivors (cr-report), and keeps the
# session databases in out/mutation/ for `cr-report` and `cr-html`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -x .venv/bin/python ] || bash scripts/setup.sh
.venv/bin/pip install -q cosmic-ray
mkdir -p out/mutation
TREE=$(mktemp -d /tmp/sbtck-mutation.XXXXXX)
git worktree add -q --detach "$TREE" "${MUTATION_REV:-HEAD}"
trap 'git worktree remove --force "$TREE"' EXIT
modules=("$@")
[ ${#modules[@]} -gt 0 ] || mapfile -t modules < <(cd "$TREE" && ls engine/*.py | grep -v __init__)
for module in "${modules[@]}"; do
  name=$(basename "$module" .py)
  config="$ROOT/out/mutation/$name${MUTATION_TAG:-}.toml"
  session="$ROOT/out/mutation/$name${MUTATION_TAG:-}.sqlite"
  cat > "$config" <<TOML
[cosmic-ray]
module-path = "$module"
timeout = 120.0
excluded-modules = []
test-command = "env PYTHONPATH=$TREE $ROOT/.venv/bin/python -m pytest -x -q -p no:cacheprovider steps"

[cosmic-ray.distributor]
name = "local"
TOML
  if [ -z "${MUTATION_RESUME:-}" ] || [ ! -f "$session" ]; then
    rm -f "$session"
    (cd "$TREE" && "$ROOT/.venv/bin/cosmic-ray" init "$config" "$session")
  fi
  # mutants of a function's annotations are equivalent (scripts/mutation_annotations.py): set aside, not run
  (cd "$TREE" && "$ROOT/.venv/bin/python" "$ROOT/scripts/mutation_annotations.py" skip "$session" "$module")
  (cd "$TREE" && "$ROOT/.venv/bin/cosmic-ray" exec "$config" "$session")
  echo "== $module"
  "$ROOT/.venv/bin/python" scripts/mutation_annotations.py count "$session"
  "$ROOT/.venv/bin/cr-report" --surviving-only --show-diff "$session"
  # HEAD's survivors go beside their reasons (tests/engine/mutation/): each needs a scenario or a reason
  [ -n "${MUTATION_REV:-}" ] || "$ROOT/.venv/bin/python" scripts/mutation_record.py "$session" "$module"
done
