#!/usr/bin/env bash
# The test suite, from a fresh machine: environment with the dev, media, report, lpips and ray
# extras (torch 2.14.1 from this machine's disk: about 3 minutes and 5.3 GiB; ray: a 79 MB
# wheel, 240 MB installed, about 5 s), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/env.sh dev,media,report,lpips,ray
.venv/bin/python -m pytest "$@"
