#!/usr/bin/env bash
# Builds the container image of the reference engine, served over the protocol:
#   bash scripts/build-image.sh [IMAGE]        (default sbtck-reference:latest)
# No registry is reached: the base image is made with debootstrap from Debian's
# packages and imported into the local Docker engine.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=sbtck-base:bookworm
IMAGE=${1:-sbtck-reference:latest}

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  echo "build-image: making $BASE with debootstrap (about 40 s)" >&2
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase --include=python3,python3-yaml bookworm "$root" >/dev/null
  tar -C "$root" -c . | docker import - "$BASE" >/dev/null
fi

# The kit's own dependencies that Debian's python3 lacks come from .venv (a
# wheel's files, copied as installed: the image reaches no registry); the base
# has PyYAML. setup.sh makes .venv when this runs first on a fresh machine.
[ -x .venv/bin/python ] || bash scripts/setup.sh
context=$(mktemp -d)
# the kit's one package, its links to engine/, iut/, ... followed
cp -rL sbtck "$context/"
mkdir "$context/site"
.venv/bin/python - "$context/site" <<'PYTHON'
import shutil
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement

site = Path(sys.argv[1])
# every distribution the kit needs without an extra, and theirs in turn, but PyYAML (the base has Debian's): a
# list written here went stale when the kit gained a dependency, and the image failed at its first import
# (the kit's own from pyproject.toml, which an editable install's metadata may lag behind)
needed, seen = list(tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]), set()
while needed:
    name = Requirement(needed.pop()).name.lower().replace("_", "-")
    if name in seen or name == "pyyaml":
        continue
    seen.add(name)
    for text in distribution(name).requires or ():
        wanted = Requirement(text)
        if wanted.marker is None or wanted.marker.evaluate({"extra": ""}):
            needed.append(text)
for name in sorted(seen):
    dist = distribution(name)
    for file in dist.files or ():
        source = Path(dist.locate_file(file))
        # a console script's record runs up out of site-packages (../../../bin/pytest): the image runs none
        if source.is_file() and "__pycache__" not in file.parts and ".." not in file.parts:
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
PYTHON
find "$context" -name __pycache__ -prune -exec rm -rf {} +
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY site /app/site
COPY sbtck /app/sbtck
ENV PYTHONPATH=/app:/app/site PYTHONUNBUFFERED=1
WORKDIR /app
CMD ["sh", "-c", "exec python3 -m sbtck.cli serve --tcp 127.0.0.1:\${SBTCK_PORT:-4022}"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$context" >/dev/null
rm -rf "$context"
# an image whose server cannot even import is refused here, with its traceback,
# rather than found by every scenario as a container that exited
if ! docker run --rm --network none "$IMAGE" python3 -m sbtck.cli --version >/dev/null; then
  docker image rm -f "$IMAGE" >/dev/null 2>&1 || true
  echo "build-image: $IMAGE does not start (its traceback is above); removed" >&2
  exit 1
fi
echo "build-image: $IMAGE ready" >&2
