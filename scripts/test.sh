#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The UI's browser tests (tests/ui) drive the OS's headless Chromium: install it once.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
            >/dev/null; } || echo "scripts/test.sh: could not install chromium; the browser tests will say so" >&2
    else
        echo "scripts/test.sh: install chromium and chromium-driver for the browser tests" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
