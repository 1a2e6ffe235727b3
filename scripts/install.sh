#!/usr/bin/env bash
# Creates .venv and installs trainjobs with everything it needs (service, trainer,
# tests). Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
# As root, local replicas run as unprivileged uids (docs/local.md) and must be able to
# execute the interpreter: one under root's private home (pyenv) is closed to them,
# so the system's own Python 3.11 is preferred when there is one.
if [ -z "${PYTHON:-}" ] && [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3.11 ]; then
    PYTHON=/usr/bin/python3.11
fi
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "trainjobs needs Python 3.11 (set PYTHON=/path/to/python3.11)")'
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.trainjobs-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[trainer,test]"
    echo "$want" > "$stamp"
fi
