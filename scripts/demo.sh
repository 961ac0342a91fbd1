#!/usr/bin/env bash
# The main job on the bundled seed sample, from a fresh machine:
# environment, throwaway key, seal, verify, inspect, replay.
# Each step prints its verdict first and a summary that fits one screen; the full
# replay text goes to a file (its path is printed). Add -v to a command for the full listing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/env.sh
out="${DEMO_OUT:-$(mktemp -d)}"
mkdir -p "$out"
bundle=.venv/bin/bundle
sample=samples/h3-ref2va-5s
b="$out/h3-ref2va-5s.bundle"
echo "== keygen (throwaway key in $out)"
"$bundle" keygen -o "$out/demo.key" --force
echo
echo "== seal $sample"
# The sample's plan has three plan-check warnings on purpose (samples/h3-ref2va-5s/README.md, "Plan");
# seal prints them in one line and names the command that explains it.
"$bundle" seal "$sample" -o "$b" --key "$out/demo.key" --force
echo
echo "== verify"
"$bundle" verify "$b" --key "$out/demo.key.pub"
echo
echo "== inspect"
"$bundle" inspect "$b" --key "$out/demo.key.pub"
echo
echo "== replay (verdict first; full text in $out/replay.txt)"
code=0
"$bundle" replay "$b" --key "$out/demo.key.pub" >"$out/replay.txt" || code=$?
sed "/^$/q" "$out/replay.txt"  # the headline block, up to its first blank line
echo "   ... $(wc -l <"$out/replay.txt") lines in all: less $out/replay.txt (exit $code)"
echo
echo "== done: $b"
exit "$code"
