#!/usr/bin/env bash
# The plugin's tests, against Debian's own MariaDB server:
#   1. the mtr suite (mariadb/mysql-test/subito) with Debian's mariadb-test;
#   2. sysbench's OLTP workloads on Subito tables in a private server, each
#      of which must run without errors (deadlocks are retried, as sysbench
#      does by default), followed by CHECK TABLE on every table;
#   3. SIGKILL of that server under oltp_read_write, restart, CHECK TABLE and
#      the row count (every transaction keeps it).
# Prints "plugin tests: N passed, M failed" and fails if any failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-mariadb.sh
export DEBIAN_FRONTEND=noninteractive
dpkg-query -W -f='${Status}' sysbench 2>/dev/null | grep -q "install ok installed" ||
  apt-get install -y -qq --no-upgrade sysbench >/dev/null

passed=0
failed=0
step() { printf '\n=== %s\n' "$*"; }

step "mtr suite subito"
ln -sfn "$ROOT/mariadb/mysql-test/subito" /usr/share/mysql/mysql-test/suite/subito
log="$(mktemp)"
if (cd /usr/share/mysql/mysql-test && ./mtr --mem --suite=subito --parallel=1 --force \
      --max-test-fail=0 --retry=0) >"$log" 2>&1; then
  :
fi
grep -E '^subito\.[a-z_]+ +\[ (pass|fail|skipped) \]' "$log" || true
p=$(grep -cE '^subito\.[a-z_]+ +\[ pass \]' "$log" || true)
f=$(grep -cE '^subito\.[a-z_]+ +\[ fail \]' "$log" || true)
if [ "$p" -eq 0 ] || ! grep -q 'Completed: All' "$log"; then
  grep -vE '^\s*$' "$log" | tail -60
  [ "$f" -gt 0 ] || f=1
fi
passed=$((passed + p))
failed=$((failed + f))
rm -f "$log"

step "sysbench on Subito tables"
dir="$(mktemp -d /var/tmp/subito-sysbench.XXXXXX)"
trap 'bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash scripts/server-start.sh --dir "$dir" --port 3392 --pm-dir "/dev/shm/subito-test-$$"
sock="$dir/mysqld.sock"
sql() { mariadb --no-defaults --socket="$sock" -uroot -N -e "$1"; }
sql "CREATE DATABASE sbtest"
SB=(sysbench --db-driver=mysql --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest
    --mysql-storage-engine=subito --tables=4 --table-size=5000 --report-interval=0)
"${SB[@]}" oltp_common prepare >/dev/null
for w in oltp_read_only oltp_read_write oltp_write_only oltp_point_select oltp_insert oltp_delete; do
  out="$("${SB[@]}" --threads=4 --time=6 "$w" run 2>&1)" && rc=0 || rc=$?
  tps="$(echo "$out" | sed -nE 's/.*transactions: +[0-9]+ +\(([0-9.]+) per sec.*/\1/p')"
  ign="$(echo "$out" | sed -nE 's/.*ignored errors: +([0-9]+).*/\1/p')"
  if [ "$rc" -eq 0 ] && [ -n "$tps" ]; then
    echo "sysbench $w: ok, $tps tps, ${ign:-0} deadlocks retried"
    passed=$((passed + 1))
  else
    echo "$out" | tail -20
    echo "sysbench $w: FAILED"
    failed=$((failed + 1))
  fi
done
check="$(sql "CHECK TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.sbtest3, sbtest.sbtest4")"
if [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq 4 ]; then
  echo "CHECK TABLE after the workloads: ok"
  passed=$((passed + 1))
else
  echo "$check"
  echo "CHECK TABLE after the workloads: FAILED"
  failed=$((failed + 1))
fi

step "SIGKILL under a write load, restart, consistency"
before="$(sql "SELECT SUM(c) FROM (SELECT COUNT(*) c FROM sbtest.sbtest1 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest2 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest3 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest4) x")"
"${SB[@]}" --threads=4 --time=20 oltp_read_write run >/dev/null 2>&1 &
load=$!
sleep 6
bash scripts/server-stop.sh --dir "$dir" --kill
wait "$load" || true
t0=$(date +%s.%N)
bash scripts/server-start.sh --dir "$dir" --port 3392 --pm-dir "/dev/shm/subito-test-$$" >/dev/null
t1=$(date +%s.%N)
echo "restart after SIGKILL: $(awk -v a="$t0" -v b="$t1" "BEGIN { printf \"%.2f\", b - a }") s to the first answered query"
grep -h 'Subito: opened' "$dir/error.log" | tail -1 | sed 's/.*Subito: /Subito: /' || true
check="$(sql "CHECK TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.sbtest3, sbtest.sbtest4")"
after="$(sql "SELECT SUM(c) FROM (SELECT COUNT(*) c FROM sbtest.sbtest1 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest2 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest3 UNION ALL SELECT COUNT(*) FROM sbtest.sbtest4) x")"
# oltp_read_write deletes a row and inserts it back in one transaction, so
# every committed state has the same number of rows.
if [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq 4 ] && [ "$before" = "$after" ]; then
  echo "after SIGKILL: CHECK TABLE ok, $after rows as before"
  passed=$((passed + 1))
else
  echo "$check"
  echo "after SIGKILL: FAILED (rows before $before, after $after)"
  failed=$((failed + 1))
fi
bash scripts/server-stop.sh --dir "$dir" >/dev/null
rm -rf "/dev/shm/subito-test-$$"

echo
echo "plugin tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
