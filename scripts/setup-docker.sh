#!/usr/bin/env bash
# Makes a Docker engine available for the container tests: installs Debian's
# docker.io and debootstrap if missing, starts dockerd (no bridge, no
# iptables: containers use host networking), and builds the reference image.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  [ -f /tmp/.sbtck-apt-updated ] || { apt-get update -qq && touch /tmp/.sbtck-apt-updated; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  nohup dockerd --bridge=none --iptables=false >/tmp/sbtck-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup-docker: dockerd did not start; see /tmp/sbtck-dockerd.log" >&2; exit 1; }
fi
bash scripts/build-image.sh
