#!/usr/bin/env bash
# Creates .venv and installs trainjobs with everything it needs (service, trainer,
# tests) and the Python client (clients/python). Re-running is cheap: it reinstalls
# only when a pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "trainjobs needs Python 3.11 (set PYTHON=/path/to/python3.11)")'
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.trainjobs-installed
want=$(cat pyproject.toml clients/python/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[trainer,test]" -e clients/python   # the service and its Python client
    echo "$want" > "$stamp"
fi
