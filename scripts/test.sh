#!/usr/bin/env bash
# The test suite, from a fresh machine: environment with the dev, media and report extras, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/env.sh dev,media,report
.venv/bin/python -m pytest "$@"
