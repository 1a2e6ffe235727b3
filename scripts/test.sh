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
# Slurm (munge, slurmctld, slurmd, clients) for the slurm backend's tests (tests/backends/slurm), which
# configure and start their own cluster in a temporary folder: installing must start no system service,
# so a policy-rc.d that refuses every start is in place for the install (and removed after, if ours).
if ! PATH="/usr/sbin:/sbin:$PATH" command -v slurmctld >/dev/null || ! PATH="/usr/sbin:/sbin:$PATH" command -v munged >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        ours=""
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && ours=1
        fi
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmctld slurmd \
            slurm-client munge >/dev/null; } || echo "scripts/test.sh: could not install Slurm; the slurm tests will say so" >&2
        if [ -n "$ours" ]; then rm -f /usr/sbin/policy-rc.d; fi
    else
        echo "scripts/test.sh: install slurmctld, slurmd, slurm-client and munge for the slurm backend's tests" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
