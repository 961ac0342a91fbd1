#!/usr/bin/env bash
# The main job on the bundled seed sample, from a fresh machine:
# environment, throwaway key, seal, verify, inspect, replay.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/env.sh
out="${DEMO_OUT:-$(mktemp -d)}"
mkdir -p "$out"
bundle=.venv/bin/bundle
sample=samples/h3-ref2va-5s
echo "== keygen (throwaway key in $out)"
"$bundle" keygen -o "$out/demo.key" --force
echo "== seal $sample"
"$bundle" seal "$sample" -o "$out/h3-ref2va-5s.bundle" --key "$out/demo.key" --force
echo "== verify"
"$bundle" verify "$out/h3-ref2va-5s.bundle" --key "$out/demo.key.pub"
echo "== inspect"
"$bundle" inspect "$out/h3-ref2va-5s.bundle" --key "$out/demo.key.pub"
if "$bundle" replay --help >/dev/null 2>&1; then
  echo "== replay"
  "$bundle" replay "$out/h3-ref2va-5s.bundle" --key "$out/demo.key.pub"
fi
echo "== done: $out/h3-ref2va-5s.bundle"
