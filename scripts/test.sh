#!/usr/bin/env bash
# The test suite, from a fresh machine: environment with the dev, media, report and lpips
# extras (torch 2.14.1 from this machine's disk: about 3 minutes and 5.3 GiB), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/env.sh dev,media,report,lpips
.venv/bin/python -m pytest "$@"
