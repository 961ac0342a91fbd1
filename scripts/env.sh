#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install reprobundle into it.
# Usage: scripts/env.sh [EXTRAS]   e.g. scripts/env.sh dev   (default: no extras)
# Each long step says what it installs and how long it usually takes, on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
say() { printf 'env.sh: %s\n' "$*" >&2; }
# shellcheck source=scripts/heartbeat.sh
. scripts/heartbeat.sh
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$python" --version 2>&1) (a few seconds)"
  "$python" -m venv .venv
fi
say "updating pip in .venv (usually under 10 s)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
spec="."
[ -n "$extras" ] && spec=".[$extras]"
case ",$extras," in
  *,lpips,*)
    say "installing reprobundle (editable) with extras '$extras': click, pyarrow, numpy, scipy," \
      "cryptography, ... and, for lpips, torch 2.14.1 + torchvision 0.29.1 (about 6.4 GB on disk);" \
      "usually 3-4 minutes, less when the wheels are cached" ;;
  *)
    say "installing reprobundle (editable)${extras:+ with extras '$extras'}: click, pyarrow, numpy," \
      "scipy, cryptography, ... (about 1.1 GB with the dev, media, report and ray extras);" \
      "usually 1-2 minutes, less when cached" ;;
esac
say "a progress line every 15 s (pip's full output: .venv/pip-install.log)"
with_heartbeat 15 .venv/pip-install.log \
  .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -e "$spec"
say "ready: .venv/bin/bundle"
