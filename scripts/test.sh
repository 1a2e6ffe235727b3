#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# OS packages some tests drive, installed once: headless Chromium for the UI's browser
# tests (tests/ui); gcc for the local sandbox's attack test (it builds a .so as a job would,
# tests/backends/test_local_sandbox_env.py) and util-linux's setpriv (a machine without
# CAP_SYS_ADMIN, tests/backends/test_local_sandbox_start.py).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v gcc >/dev/null \
        || ! command -v setpriv >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
            gcc libc6-dev util-linux >/dev/null; } || echo "scripts/test.sh: could not install chromium/gcc/util-linux; the tests that need them will say so" >&2
    else
        echo "scripts/test.sh: install chromium, chromium-driver, gcc and util-linux for the browser and sandbox tests" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
