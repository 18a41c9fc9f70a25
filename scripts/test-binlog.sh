#!/usr/bin/env bash
# The binary log and Subito commit together (two-phase commit) across
# SIGKILL: a private server with log_bin and sync_binlog=1, four clients
# moving money between accounts with a ledger row per transfer, SIGKILL,
# restart (the server's binlog recovery commits the transactions Subito
# kept prepared whose Xid the binlog holds, and rolls back the others),
# then per round: balances, every acknowledged commit, and the ledger rows
# of the table equal to those of whole transactions in the binlog, which
# is what a replica applies (tests/binlog/two_phase.py).
#   scripts/test-binlog.sh [--rounds N]     (default 6)
# Prints "binlog tests: N passed, M failed"; fails if any failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ROUNDS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) echo "test-binlog: unknown option $1" >&2; exit 2 ;;
  esac
done
bash scripts/setup-mariadb.sh >/dev/null
bash scripts/install-deps.sh

dir="$(mktemp -d /var/tmp/subito-binlog.XXXXXX)"
pm="/dev/shm/subito-binlog-$$"
trap 'bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir" "$pm"' EXIT
BINLOG=(-- --default-storage-engine=SUBITO --log-bin="$dir/data/mysql-bin" --sync-binlog=1 --binlog-format=ROW --server-id=1)
start() { bash scripts/server-start.sh --dir "$dir" --port 3393 --pm-dir "$pm" "${BINLOG[@]}" >/dev/null; }
sock="$dir/mysqld.sock"
sql() { mariadb --no-defaults --socket="$sock" -uroot -N -e "$1"; }
start
mariadb --no-defaults --socket="$sock" -uroot <tests/binlog/schema.sql

passed=0
failed=0
hits=0
for r in $(seq 1 "$ROUNDS"); do
  rm -f "$dir"/acked.*
  clients=()
  for c in 1 2 3 4; do
    /usr/bin/python3 tests/binlog/two_phase.py load --socket "$sock" --client "$c" --round "$r" \
      --acked "$dir/acked.$c" &
    clients+=($!)
  done
  sleep "$((3 + r % 4))"
  bash scripts/server-stop.sh --dir "$dir" --kill >/dev/null
  wait "${clients[@]}" 2>/dev/null || true
  start
  opened="$(grep -h 'Subito: opened' "$dir/error.log" | tail -1 | sed 's/.*Subito: opened [^ ]* //')"
  kept="$(echo "$opened" | sed -nE 's/.*, ([0-9]+) kept prepared.*/\1/p')"
  [ "${kept:-0}" -gt 0 ] && hits=$((hits + 1))
  echo "round $r: Subito opened $opened"
  grep -hE 'Recovering after a crash|Crash (table )?recovery finished|prepared XA' "$dir/error.log" |
    sed 's/^[^[]*\[[A-Za-z]*\] /  server: /' | tail -3 || true
  out="$(/usr/bin/python3 tests/binlog/two_phase.py check --socket "$sock" --round "$r" \
           --binlog-dir "$dir/data" --acked-glob "$dir/acked.*")" && rc=0 || rc=$?
  echo "$out" | sed "s/^/round $r: /"
  passed=$((passed + $(echo "$out" | grep -c ': ok' || true)))
  failed=$((failed + $(echo "$out" | grep -c ': FAILED' || true)))
  [ "$rc" -eq 0 ] || [ "$(echo "$out" | grep -c ': FAILED' || true)" -gt 0 ] || failed=$((failed + 1))
done
check="$(sql "CHECK TABLE sbtest.acct, sbtest.ledger")"
if [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq 2 ]; then
  echo "CHECK TABLE after $ROUNDS rounds: ok"; passed=$((passed + 1))
else
  echo "$check"; echo "CHECK TABLE after $ROUNDS rounds: FAILED"; failed=$((failed + 1))
fi
echo "rounds whose restart found transactions Subito had kept prepared for the binlog to decide: $hits of $ROUNDS"
# Without such a round the run never reached the window it is about.
if [ "$hits" -gt 0 ]; then passed=$((passed + 1)); else
  echo "no round found a prepared transaction: the test did not reach the prepare window: FAILED"
  failed=$((failed + 1))
fi
echo "binlog tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
