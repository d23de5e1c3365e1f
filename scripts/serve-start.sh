# Sourced by the scripts that test `serve` with outside clients: `start_server CHECKPOINT
# [FLAGS...]` starts "$BIN" serve on a free loopback port, logging to "$work/serve.log", and
# sets `server` (its pid) and `url` once it listens; `stop_server` sends SIGTERM and fails
# unless it exits 0 saying it answered every request in flight. The caller sets BIN and work
# and kills "$server" in its EXIT trap when it is not empty.

start_server() {
  local checkpoint="$1"
  shift
  "$BIN" serve --device cpu --checkpoint "$checkpoint" --port 0 "$@" 2> "$work/serve.log" &
  server=$!
  url=""
  for _ in $(seq 100); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.log" | head -1 || true)
    [ -n "$url" ] && return 0
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "serve did not start: $(cat "$work/serve.log")" >&2
  exit 1
}

stop_server() {
  local stopped=0
  kill -TERM "$server"
  wait "$server" || stopped=$?
  server=""
  if [ "$stopped" != 0 ] || ! grep -q "every request in flight was answered" "$work/serve.log"; then
    cat "$work/serve.log" >&2
    echo "serve exited $stopped on SIGTERM" >&2
    exit 1
  fi
}
