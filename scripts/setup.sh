#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for sbtck: a virtual environment
# with the kit and its tools in .venv, Java 17 and procps (for the Spark stage).
# Safe to run again: it does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    say "cannot install $* without root; install it with apt-get and run again"
    return 1
  fi
  if [ ! -f /tmp/.sbtck-apt-updated ]; then
    apt-get update -qq && touch /tmp/.sbtck-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || { say "no $PYTHON on PATH; sbtck needs Python 3.11 or newer"; exit 1; }
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { say "$PYTHON is older than 3.11"; exit 1; }

if ! command -v java >/dev/null; then
  say "installing Java 17 (openjdk-17-jre-headless) for the Spark stage"
  apt_install openjdk-17-jre-headless || { say "the Spark stage and its tests need Java 17: install it and run again"; exit 1; }
fi

if ! command -v ps >/dev/null; then
  say "installing procps: Spark's spark-daemon.sh (the standalone cluster of the tests) calls ps"
  apt_install procps || { say "install procps and run again"; exit 1; }
fi

if ! command -v node >/dev/null; then
  say "installing Node.js: the tests run the outside brokers of ../shared/independent and the Node.js example"
  apt_install nodejs || say "continuing without node: those tests will be skipped (in CI they fail)"
fi

if ! command -v chromium >/dev/null; then
  say "installing Debian's chromium, for the tests that open the report in a browser"
  apt_install chromium || say "continuing without chromium: the browser tests will be skipped"
fi

if [ ! -x .venv/bin/python ]; then
  say "creating the virtual environment .venv"
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    apt_install python3-venv
    "$PYTHON" -m venv .venv
  fi
fi

stamp=.venv/.sbtck-installed
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  say "installing sbtck and its tools into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
  echo "$wanted" >"$stamp"
fi

# the JUnit readers of the Node.js world that the report's tests read junit.xml with (test-results-parser, as
# GitHub actions use it, and xunit-viewer), in .venv, never in the checkout
readers=.venv/junit-readers
if command -v node >/dev/null && [ ! -d "$readers/node_modules/xunit-viewer" ]; then
  command -v npm >/dev/null || { say "installing npm, for the JUnit readers"; apt_install npm || true; }
  if command -v npm >/dev/null; then
    say "installing the JUnit readers test-results-parser and xunit-viewer into $readers"
    npm install -s --no-audit --no-fund --prefix "$readers" test-results-parser@0.4.6 xunit-viewer@10.6.1 >/dev/null \
      || say "continuing without the JUnit readers: their test will be skipped (in CI it fails)"
  fi
fi
