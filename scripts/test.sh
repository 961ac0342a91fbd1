#!/usr/bin/env bash
# The test suite, from a fresh machine: environment with the dev, media and report extras,
# plus the lpips extra (torch 2.14.1 + torchvision: the venv about 6.4 GB and 3-4 minutes) and the ray extra
# (a 79 MB wheel, 240 MB installed, about 5 s), then pytest.
# Usage: scripts/test.sh [--no-lpips] [PYTEST ARGS...]
#   --no-lpips  install without the lpips extra (no torch; the venv about 1.1 GB): the tests that need
#               torch skip, each saying which extra is missing (pytest -ra lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="dev,media,report,lpips,ray"
if [ "${1:-}" = "--no-lpips" ]; then
  extras="dev,media,report,ray"
  shift
fi
scripts/env.sh "$extras"
.venv/bin/python -m pytest "$@"
