# with_heartbeat SECONDS LOG COMMAND...: run COMMAND with its output in LOG, and every
# SECONDS print on stderr how long it has run and the last line it wrote (pip's
# "Collecting torch ...", "Installing collected packages ..."), so that a long quiet
# install is never minutes of silence. Exits with COMMAND's status; on failure the
# end of LOG is shown. Sourced by scripts/env.sh; tests/test_scripts_heartbeat.py runs it.
with_heartbeat() {
  local every="$1" log="$2"
  shift 2
  "$@" >"$log" 2>&1 &
  local pid=$! start=$SECONDS next=$((SECONDS + every)) status=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      local last
      last="$(tail -n 1 "$log" 2>/dev/null | cut -c1-120)"
      printf 'env.sh: ... still installing (%d s): %s\n' "$((SECONDS - start))" "${last:-working}" >&2
      next=$((SECONDS + every))
    fi
  done
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    printf 'env.sh: failed (exit %d); the end of %s:\n' "$status" "$log" >&2
    tail -n 20 "$log" >&2
  fi
  return "$status"
}
