#!/usr/bin/env bash
# Many Subito tables in one server, with a bounded number of open page
# files: creates N tables (default 10,000) with two secondary indexes each,
# writes a row into each, restarts the server, reads every row back through
# each index, drops every table; all the while mariadbd never holds more
# descriptors on Subito's page files than subito_open_files allows
# (sampled from /proc/PID/fd), and no page file is left at the end.
#
#   scripts/test-many-tables.sh [--tables N] [--open-files F]
# Prints "many tables: ok" (or FAILED with the reason) and exits 0 / 1.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
N=10000
F=200
while [ $# -gt 0 ]; do
  case "$1" in
    --tables) N="$2"; shift 2 ;;
    --open-files) F="$2"; shift 2 ;;
    *) echo "test-many-tables: unknown option $1" >&2; exit 2 ;;
  esac
done

dir="$(mktemp -d /var/tmp/subito-many.XXXXXX)"
pm="/dev/shm/subito-many-$$"
cleanup() {
  [ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null || true
  bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir" "$pm"
}
trap cleanup EXIT
start() {
  bash scripts/server-start.sh --dir "$dir" --port 3394 --pm-dir "$pm" -- \
    --subito-open-files="$F" >/dev/null
}
sock="$dir/mysqld.sock"
sql() { mariadb --no-defaults --socket="$sock" -uroot -N "$@"; }
fail() { echo "many tables: FAILED: $*"; exit 1; }
# Samples the page-file descriptors of the running server into $dir/fds.
sample() {
  local pid
  pid="$(cat "$dir/mysqld.pid")"
  while kill -0 "$pid" 2>/dev/null; do
    find "/proc/$pid/fd" -maxdepth 1 -lname '*#subito/*.sbt*' 2>/dev/null | wc -l >>"$dir/fds"
    sleep 0.2
  done
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

start
sample &
sampler=$!
[ "$(sql -e "SELECT @@subito_open_files")" = "$F" ] || fail "subito_open_files is not $F"
sql -e "CREATE DATABASE many"
t=$(date +%s.%N)
for i in $(seq 1 "$N"); do
  echo "CREATE TABLE many.t$i (id INT PRIMARY KEY, a INT, b VARCHAR(20), KEY (a), KEY (b)) ENGINE=SUBITO;"
done | sql
echo "created $N tables (3 page files each) in $(elapsed "$t") s"
t=$(date +%s.%N)
for i in $(seq 1 "$N"); do echo "INSERT INTO many.t$i VALUES ($i, $i * 2, 'row $i');"; done | sql
echo "wrote a row into each in $(elapsed "$t") s"
closes="$(sql -e "SHOW STATUS LIKE 'Subito_file_closes'" | awk '{ print $2 }')"
[ "${closes:-0}" -gt 0 ] || fail "no descriptor was closed for room (Subito_file_closes $closes)"

bash scripts/server-stop.sh --dir "$dir" >/dev/null
wait "$sampler" 2>/dev/null || true
start
sample &
sampler=$!
t=$(date +%s.%N)
# Each table's row through the primary key and both secondary indexes.
for i in $(seq 1 "$N"); do
  echo "SELECT (SELECT COUNT(*) FROM many.t$i WHERE id = $i) + (SELECT COUNT(*) FROM many.t$i FORCE INDEX (a) WHERE a = $i * 2) + (SELECT COUNT(*) FROM many.t$i FORCE INDEX (b) WHERE b = 'row $i');"
done | sql >"$dir/found"
bad="$(grep -cvx 3 "$dir/found" || true)"
[ "$(wc -l <"$dir/found")" -eq "$N" ] && [ "$bad" -eq 0 ] ||
  fail "after the restart, $bad of $N tables did not return their row through all three indexes"
echo "read every row back through each index after a restart in $(elapsed "$t") s"
t=$(date +%s.%N)
for i in $(seq 1 "$N"); do echo "DROP TABLE many.t$i;"; done | sql
echo "dropped $N tables in $(elapsed "$t") s"
left="$(find "$dir/data/#subito" -name '*.sbt*' | wc -l)"
[ "$left" -eq 0 ] || fail "$left page files left after dropping every table"
max="$(sort -n "$dir/fds" | tail -1)"
echo "page-file descriptors: at most $max open at once over $(wc -l <"$dir/fds") samples (subito_open_files $F); $closes closed for room while writing"
[ "$max" -le "$F" ] || fail "mariadbd held $max page-file descriptors, more than subito_open_files $F"
echo "many tables: ok"
