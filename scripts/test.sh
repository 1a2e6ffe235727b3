#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# OS packages some tests drive, installed once: headless Chromium for the UI's browser
# tests (tests/ui); gcc for the local sandbox's attack test (it builds a .so as a job would,
# tests/backends/local/test_sandbox_env.py), util-linux's setpriv (a machine without
# CAP_SYS_ADMIN, tests/backends/local/test_sandbox_start.py), iproute2 and nftables for the
# partition test (tests/faults/test_partition.py: a network namespace of its own and a DROP
# rule in it).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v gcc >/dev/null \
        || ! command -v setpriv >/dev/null || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
            gcc libc6-dev util-linux iproute2 nftables >/dev/null; } \
            || echo "scripts/test.sh: could not install chromium/gcc/util-linux/iproute2/nftables; the tests that need them will say so" >&2
    else
        echo "scripts/test.sh: install chromium, chromium-driver, gcc, util-linux, iproute2 and nftables for the browser, sandbox and partition tests" >&2
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
# One pytest worker more than there are cores (pytest-xdist; TRAINJOBS_TEST_WORKERS=0 runs in this
# process): much of the suite waits on subprocesses, Slurm's polls, TensorFlow's start and the
# database, and at one worker per core a fresh-clone run kept 1.39 of 2 cores busy (issue 50.6).
# Each worker has its own PostgreSQL database and replica uids (tests/conftest.py). worksteal: the
# long tests (real TensorFlow, several `serve` processes) do not leave one worker with the tail.
# --durations: every run names its slowest tests, so a suite creeping past 20 minutes says where.
exec .venv/bin/python -m pytest -n "${TRAINJOBS_TEST_WORKERS:-$(( $(nproc) + 1 ))}" --dist worksteal --durations=15 "$@"
