#!/usr/bin/env bash
# Stops the private server that scripts/server-start.sh started, by its pid.
#   scripts/server-stop.sh [--dir D] [--kill]   (--kill: SIGKILL, a crash)
set -euo pipefail
DIR="${SUBITO_SERVER_DIR:-/var/tmp/subito-server}"
SIG=TERM
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --kill) SIG=KILL; shift ;;
    *) echo "server-stop: unknown option $1" >&2; exit 2 ;;
  esac
done
PID_FILE="$DIR/mysqld.pid"
[ -f "$PID_FILE" ] || { echo "server-stop: no server from $DIR"; exit 0; }
pid="$(cat "$PID_FILE")"
if ! kill -0 "$pid" 2>/dev/null; then
  rm -f "$PID_FILE"
  echo "server-stop: pid $pid had already ended"
  exit 0
fi
kill -s "$SIG" "$pid"
for _ in $(seq 1 1200); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  echo "server-stop: pid $pid still runs after 120 s" >&2
  exit 1
fi
rm -f "$PID_FILE"
echo "server-stop: pid $pid stopped ($SIG)"
