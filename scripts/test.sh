#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# OS packages some tests drive, installed once: headless Chromium for the UI's browser
# tests (tests/ui), bubblewrap for the local backend's sandbox option.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
            bubblewrap >/dev/null; } || echo "scripts/test.sh: could not install chromium/bubblewrap; the tests that need them will say so" >&2
    else
        echo "scripts/test.sh: install chromium, chromium-driver and bubblewrap for the browser and sandbox tests" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
