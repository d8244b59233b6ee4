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

context=$(mktemp -d)
# the kit's one package, its links to engine/, iut/, ... followed
cp -rL sbtck "$context/"
find "$context" -name __pycache__ -prune -exec rm -rf {} +
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY sbtck /app/sbtck
ENV PYTHONPATH=/app PYTHONUNBUFFERED=1
WORKDIR /app
CMD ["sh", "-c", "exec python3 -m sbtck.cli serve --tcp 127.0.0.1:\${SBTCK_PORT:-4022}"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$context" >/dev/null
rm -rf "$context"
echo "build-image: $IMAGE ready" >&2
