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
sql "FLUSH SUBITO_TABLE_IO"
"${TPCC[@]}" run -T "$T" --time "${SECONDS_RUN}s" --interval 1000s >"$log" 2>&1 || true
if grep -q '^Finished' "$log" && grep -q 'tpmC' "$log"; then
  ok "run ($(grep -o 'tpmC: [0-9.]*' "$log"))"
else
  tail -20 "$log"; bad "run"
fi

# Per-table I/O accounting (docs/table-io.md) against TPC-C's known mix
# (the TPC-C I/O study): item only read; history, orders, new_order and
# order_line growing; stock the most updated table, hot-update.
echo "tpcc: SUBITO_PLACEMENT_ADVICE after the run (counters from FLUSH SUBITO_TABLE_IO)"
mariadb --no-defaults --socket="$dir/mysqld.sock" -uroot --table -e "
  SELECT a.TABLE_NAME, a.CLASS, a.ACTION, a.ROWS_READ, a.ROWS_CHANGED,
         ROUND(a.READ_SHARE * 100, 1) AS read_pct, ROUND(a.WRITE_SHARE * 100, 1) AS write_pct,
         a.WRITE_RANK, ROUND(a.GROWTH_BYTES / 1048576, 2) AS grew_mib
    FROM information_schema.SUBITO_PLACEMENT_ADVICE a WHERE a.TABLE_SCHEMA = 'tpcc'
   ORDER BY a.WRITE_RANK"
class_of() { sql "SELECT CLASS FROM information_schema.SUBITO_PLACEMENT_ADVICE WHERE TABLE_SCHEMA = 'tpcc' AND TABLE_NAME = '$1'"; }
item_changes="$(sql "SELECT ROWS_INSERTED + ROWS_UPDATED + ROWS_DELETED FROM information_schema.SUBITO_TABLE_IO WHERE TABLE_SCHEMA = 'tpcc' AND TABLE_NAME = 'item' AND INDEX_NAME = 'PRIMARY'")"
item_reads="$(sql "SELECT SUM(ROWS_READ) FROM information_schema.SUBITO_TABLE_IO WHERE TABLE_SCHEMA = 'tpcc' AND TABLE_NAME = 'item'")"
if [ "$item_changes" = 0 ] && [ "$item_reads" -gt 0 ] && [ "$(class_of item)" = read-only ]; then
  ok "accounting: item only read ($item_reads rows), read-only"
else
  bad "accounting: item only read (changed $item_changes, read $item_reads, class $(class_of item))"
fi
for t in history orders new_order order_line; do
  c="$(class_of "$t")"
  [ "$c" = growing ] && ok "accounting: $t growing" || bad "accounting: $t growing (class $c)"
done
most="$(sql "SELECT TABLE_NAME FROM information_schema.SUBITO_TABLE_IO WHERE TABLE_SCHEMA = 'tpcc' AND INDEX_NAME = 'PRIMARY' ORDER BY ROWS_UPDATED DESC LIMIT 1")"
if [ "$most" = stock ] && [ "$(class_of stock)" = hot-update ]; then
  ok "accounting: stock the most updated, hot-update"
else
  bad "accounting: stock the most updated (most: $most, stock's class $(class_of stock))"
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
