#!/usr/bin/env bash
# Starts a private MariaDB server (Debian's /usr/sbin/mariadbd) with the
# Subito plugin loaded: its own datadir, socket and loopback port, Subito's
# PM tier in /dev/shm unless --pm-dir says otherwise.
#
#   scripts/server-start.sh [--dir D] [--port P] [--pm-dir PM] [--init-option O]...
#                           [-- mariadbd options...]
#
# D (default $SUBITO_SERVER_DIR or /var/tmp/subito-server) holds data/,
# mysqld.sock, mysqld.pid and error.log. A new D gets a fresh datadir,
# made by mariadb-install-db with the --init-option options (e.g. where
# InnoDB's redo log lives, which must not change afterwards).
# Clients: mariadb --socket=D/mysqld.sock -uroot  (or -h127.0.0.1 -P P -uroot)
# SUBITO_SERVER_WRAPPER, if set, is a command line the server runs under
# (e.g. "valgrind --tool=callgrind ..."; bench/callgrind_profile.py).
set -euo pipefail

DIR="${SUBITO_SERVER_DIR:-/var/tmp/subito-server}"
PORT="${SUBITO_SERVER_PORT:-3391}"
PM_DIR=""
EXTRA=()
INIT=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --pm-dir) PM_DIR="$2"; shift 2 ;;
    --init-option) INIT+=("$2"); shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "server-start: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
SOCK="$DIR/mysqld.sock"
PID="$DIR/mysqld.pid"
LOG="$DIR/error.log"

if [ -f "$PID" ] && kill -0 "$(cat "$PID")" 2>/dev/null; then
  echo "server-start: a server already runs from $DIR (pid $(cat "$PID"))" >&2
  exit 1
fi
[ -f /usr/lib/mysql/plugin/ha_subito.so ] ||
  { echo "server-start: no ha_subito.so; run scripts/setup-mariadb.sh first" >&2; exit 1; }

if [ ! -d "$DIR/data/mysql" ]; then
  echo "server-start: new datadir $DIR/data"
  mariadb-install-db --no-defaults --datadir="$DIR/data" --user=root \
    --auth-root-authentication-method=normal --skip-test-db "${INIT[@]}" >"$DIR/install.log" 2>&1 ||
    { tail -20 "$DIR/install.log"; echo "server-start: mariadb-install-db failed" >&2; exit 1; }
fi

ARGS=(--no-defaults --datadir="$DIR/data" --socket="$SOCK" --port="$PORT"
      --bind-address=127.0.0.1 --pid-file="$PID" --log-error="$LOG" --user=root
      --plugin-load-add=ha_subito.so --plugin-maturity=alpha --skip-log-bin
      --max-connections=512)
[ -n "$PM_DIR" ] && ARGS+=(--subito-pm-dir="$PM_DIR")
: >"$LOG"
read -r -a WRAPPER <<<"${SUBITO_SERVER_WRAPPER:-}"
"${WRAPPER[@]}" /usr/sbin/mariadbd "${ARGS[@]}" "${EXTRA[@]}" >/dev/null 2>&1 &
child=$!
tries=600
[ ${#WRAPPER[@]} -gt 0 ] && tries=3000  # a server under valgrind starts in minutes
for _ in $(seq 1 "$tries"); do
  if mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1; then break; fi
  if ! kill -0 "$child" 2>/dev/null; then
    tail -30 "$LOG" >&2
    echo "server-start: mariadbd exited during start (log: $LOG)" >&2
    exit 1
  fi
  sleep 0.2
done
mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1 ||
  { tail -30 "$LOG" >&2; echo "server-start: no answer after $((tries / 5)) s (log: $LOG)" >&2; exit 1; }
support="$(mariadb --no-defaults --socket="$SOCK" -uroot -N -e \
  "SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='SUBITO'")"
if [ "$support" != "YES" ] && [ "$support" != "DEFAULT" ]; then
  grep -i subito "$LOG" | tail -10 >&2
  echo "server-start: the server runs (pid $(cat "$PID")) but without Subito (log: $LOG)" >&2
  exit 1
fi
echo "server-start: mariadbd pid $(cat "$PID"), socket $SOCK, port $PORT, Subito loaded"
