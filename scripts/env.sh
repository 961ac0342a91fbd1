#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install reprobundle into it.
# Usage: scripts/env.sh [EXTRAS]   e.g. scripts/env.sh dev   (default: no extras)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
spec="."
[ -n "$extras" ] && spec=".[$extras]"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
