#!/usr/bin/env bash
# TPC-C on Subito tables with go-tpc v1.0.9, in a private server:
#   prepare (go-tpc checks the loaded data itself), run, SIGKILL the server
#   in the middle of a run, restart it (timed), then go-tpc's consistency
#   check, which must pass, and a second run on the recovered data.
#
#   scripts/test-tpcc.sh [--warehouses W] [--threads T] [--seconds S]
# Prints "tpcc tests: N passed, M failed"; exit status 1 if any failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
W=1
T=4
SECONDS_RUN=30
while [ $# -gt 0 ]; do
  case "$1" in
    --warehouses) W="$2"; shift 2 ;;
    --threads) T="$2"; shift 2 ;;
    --seconds) SECONDS_RUN="$2"; shift 2 ;;
    *) echo "test-tpcc: unknown option $1" >&2; exit 2 ;;
  esac
done
bash scripts/setup-mariadb.sh >/dev/null
GOTPC="$(bash scripts/build-go-tpc.sh)"

passed=0
failed=0
ok() { echo "tpcc: $1: ok"; passed=$((passed + 1)); }
bad() { echo "tpcc: $1: FAILED"; failed=$((failed + 1)); }

dir="$(mktemp -d /var/tmp/subito-tpcc.XXXXXX)"
pm="/dev/shm/subito-tpcc-$$"
port=3393
cleanup() {
  bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir" "$pm"
}
trap cleanup EXIT
start() {
  bash scripts/server-start.sh --dir "$dir" --port "$port" --pm-dir "$pm" -- \
    --default-storage-engine=SUBITO --subito-buffer-pool-size=256M >/dev/null
}
sql() { mariadb --no-defaults --socket="$dir/mysqld.sock" -uroot -N -e "$1"; }
TPCC=("$GOTPC" tpcc -H 127.0.0.1 -P "$port" -U root -D tpcc --warehouses "$W")
# go-tpc prints errors but exits 0; a run or check passes when it finished
# and printed no failure.
passed_log() { grep -q '^Finished' "$1" && ! grep -qiE 'execute .* failed|check .* failed|panic' "$1"; }

start
sql "CREATE DATABASE tpcc"
log="$dir/prepare.log"
echo "tpcc: prepare, $W warehouse(s) (go-tpc loads, then checks every condition)"
"${TPCC[@]}" prepare -T 2 >"$log" 2>&1 || true
if passed_log "$log" || { ! grep -qiE 'failed|panic' "$log" && [ "$(sql "SELECT COUNT(*) FROM tpcc.warehouse")" = "$W" ]; }; then
  ok "prepare"
else
  tail -20 "$log"; bad "prepare"
fi
engines="$(sql "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'tpcc' AND ENGINE = 'SUBITO'")"
[ "$engines" -eq 9 ] && ok "all 9 tables are Subito tables" || bad "all 9 tables are Subito tables ($engines)"

log="$dir/run1.log"
"${TPCC[@]}" run -T "$T" --time "${SECONDS_RUN}s" --interval 1000s >"$log" 2>&1 || true
if grep -q '^Finished' "$log" && grep -q 'tpmC' "$log"; then
  ok "run ($(grep -o 'tpmC: [0-9.]*' "$log"))"
else
  tail -20 "$log"; bad "run"
fi

echo "tpcc: run again and SIGKILL the server after $((SECONDS_RUN / 2)) s"
log="$dir/run2.log"
"${TPCC[@]}" run -T "$T" --time "${SECONDS_RUN}s" --interval 1000s >"$log" 2>&1 &
client=$!
sleep $((SECONDS_RUN / 2))
bash scripts/server-stop.sh --dir "$dir" --kill >/dev/null
wait "$client" || true
t0=$(date +%s.%N)
start
t1=$(date +%s.%N)
echo "tpcc: restart after SIGKILL took $(awk -v a="$t0" -v b="$t1" "BEGIN { printf \"%.2f\", b - a }") s to the first answered query"
grep -h 'Subito: opened' "$dir/error.log" | tail -1 || true

log="$dir/check.log"
"${TPCC[@]}" check -T 2 >"$log" 2>&1 || true
if passed_log "$log"; then ok "check after the kill"; else tail -20 "$log"; bad "check after the kill"; fi
check="$(sql "CHECK TABLE tpcc.warehouse, tpcc.district, tpcc.customer, tpcc.history, tpcc.new_order, tpcc.orders, tpcc.order_line, tpcc.item, tpcc.stock")"
if [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq 9 ]; then
  ok "CHECK TABLE (indexes agree with rows)"
else
  echo "$check"; bad "CHECK TABLE"
fi
log="$dir/run3.log"
"${TPCC[@]}" run -T "$T" --time 10s --interval 1000s >"$log" 2>&1 || true
if grep -q '^Finished' "$log" && grep -q 'tpmC' "$log"; then ok "run after recovery"; else tail -20 "$log"; bad "run after recovery"; fi

echo
echo "tpcc tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
