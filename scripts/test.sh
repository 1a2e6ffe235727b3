#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# OS packages some tests drive, installed once: headless Chromium for the UI's browser
# tests (tests/ui), bubblewrap for the local backend's sandbox option, iproute2 and
# nftables for the partition test (tests/faults/test_partition.py: a network namespace
# of its own and a DROP rule in it).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v bwrap >/dev/null \
        || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
            bubblewrap iproute2 nftables >/dev/null; } \
            || echo "scripts/test.sh: could not install chromium/bubblewrap/iproute2/nftables; the tests that need them will say so" >&2
    else
        echo "scripts/test.sh: install chromium, chromium-driver, bubblewrap, iproute2 and nftables for the browser, sandbox and partition tests" >&2
    fi
fi
# One pytest worker per core (pytest-xdist; TRAINJOBS_TEST_WORKERS=0 runs in this process):
# much of the suite waits on subprocesses and the database, and each worker has its own
# PostgreSQL database and replica uids (tests/conftest.py). worksteal: the long tests
# (real TensorFlow, several `serve` processes) do not leave one worker with the tail.
exec .venv/bin/python -m pytest -n "${TRAINJOBS_TEST_WORKERS:-auto}" --dist worksteal "$@"
