#!/usr/bin/env bash
# One command: install, migrate the database, load the demo template, serve on
# http://127.0.0.1:8000 (SQLite file + local backend, no cloud account).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/trainjobs serve "$@"
