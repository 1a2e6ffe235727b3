#!/usr/bin/env bash
# One command: install, then run the whole test suite (SQLite and PostgreSQL,
# real subprocesses, real TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
