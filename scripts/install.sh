#!/usr/bin/env bash
# Creates .venv and installs trainjobs exactly as locked in uv.lock (service, trainer,
# tests) and the Python client (clients/python). Re-running is cheap: it syncs again
# only when pyproject.toml, uv.lock or the client's pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
# As root, local replicas run as unprivileged uids (docs/local.md) and must be able to
# execute the interpreter: one under root's private home (pyenv) is closed to them,
# so the system's own Python is preferred when there is one.
if [ -z "${PYTHON:-}" ] && [ "$(id -u)" = 0 ]; then
    for candidate in /usr/bin/python3.13 /usr/bin/python3.12 /usr/bin/python3.11; do
        if [ -x "$candidate" ]; then PYTHON=$candidate; break; fi
    done
fi
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else "trainjobs needs Python 3.11 to 3.13 (set PYTHON=/path/to/python3.x)")'
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.trainjobs-installed
# "bytecode": venvs made before the sync compiled bytecode sync once more.
want=$( (echo bytecode; cat pyproject.toml uv.lock clients/python/pyproject.toml) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if [ "$(.venv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
        .venv/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
    fi
    # --frozen: exactly the lock, never a new resolution; --inexact: keep uv itself.
    # --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (CI, containers) no process ever
    # writes a .pyc, and each one compiled what it imported from source (TensorFlow: 11 s of CPU
    # to import instead of 4; a `trainjobs jobs` call 1.5 s instead of 0.2).
    UV_PROJECT_ENVIRONMENT=.venv .venv/bin/uv sync --frozen --inexact --quiet --compile-bytecode \
        --python .venv/bin/python --extra trainer --extra test
    echo "$want" > "$stamp"
fi
# The project's own sources, for the same reason (a few seconds; files already compiled are skipped).
.venv/bin/python -m compileall -q -j 0 service trainer clients/python tests bench > /dev/null || true
