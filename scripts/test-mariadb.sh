#!/usr/bin/env bash
# The plugin's tests, against Debian's own MariaDB server:
#   1. the mtr suite (mariadb/mysql-test/subito) with Debian's mariadb-test;
#   2. sysbench's OLTP workloads on Subito tables in a private server, each
#      of which must run without errors (deadlocks are retried, as sysbench
#      does by default), followed by CHECK TABLE on every table;
#   3. SIGKILL of that server under load (transfers between accounts with
#      a ledger, and oltp_read_write), restart, then atomicity, durability of
#      every acknowledged commit, and CHECK TABLE;
#   4. MariaDB's storage_engine suite, Subito against InnoDB
#      (scripts/test-storage-engine.sh);
#   5. the differential SQL test (scripts/test-differential.sh, bounded);
#   6. many tables with few open page files (scripts/test-many-tables.sh,
#      2,000 tables; the script's default is 10,000);
#   7. a full disk under sysbench (scripts/test-disk-full.sh);
#   8. two-phase commit with the binary log across SIGKILL
#      (scripts/test-binlog.sh);
#   9. a primary and a replica with Subito tables, one SIGKILL of each
#      (scripts/test-replication.sh; --cycles 40 for the long run);
#  10. logical, online (BACKUP STAGE) and cold physical backups
#      (scripts/test-backup.sh).
# Prints "plugin tests: N passed, M failed" and fails if any failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-mariadb.sh
export DEBIAN_FRONTEND=noninteractive
dpkg-query -W -f='${Status}' sysbench 2>/dev/null | grep -q "install ok installed" ||
  apt-get install -y -qq --no-upgrade sysbench >/dev/null

source scripts/test-lib.sh
step() { printf '\n=== %s  (at %d min %02d s)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

step "mtr suite subito"
ln -sfn "$ROOT/mariadb/mysql-test/subito" /usr/share/mysql/mysql-test/suite/subito
log="$(mktemp)"
# Two workers: large_values (about 135 s) and big_row (about 80 s) overlap
# the rest (the suite took 4 min 18 s on one, 1 min 55 s on two).
if (cd /usr/share/mysql/mysql-test && ./mtr --mem --suite=subito --parallel=2 --force \
      --max-test-fail=0 --retry=0 --big-test) >"$log" 2>&1; then
  :
fi
# Count each test once (one worker prints each result twice: progress, then
# summary; two workers tag results with w1/w2).
results="$(grep -E "^subito\.[a-z_]+( '[a-z]+')? +(w[0-9]+ +)?\[ (pass|fail|skipped) \]" "$log" |
  sed -E 's/ +w[0-9]+ +\[/ [/' | sort -u || true)"
echo "$results"
p=$(echo "$results" | grep -c '\[ pass \]' || true)
f=$(echo "$results" | grep -c '\[ fail \]' || true)
if [ "$p" -eq 0 ] || ! grep -q 'Completed: All' "$log"; then
  grep -vE '^\s*$' "$log" | tail -60
  [ "$f" -gt 0 ] || f=1
fi
passed=$((passed + p))
failed=$((failed + f))
rm -f "$log"
# --mem puts the vardir in /dev/shm (var -> /dev/shm/var_auto_*), which mtr
# leaves behind: about 700 MB a run on the PM tier's file system. Kept when
# a test failed (its servers' logs).
var="$(readlink -f /usr/share/mysql/mysql-test/var 2>/dev/null || true)"
if [ "$f" -eq 0 ]; then
  case "$var" in /dev/shm/var_auto_*) rm -rf "$var" ;; esac
fi

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
TABLES="sbtest.sbtest1, sbtest.sbtest2, sbtest.sbtest3, sbtest.sbtest4"
expect_ok=4
# Succeeds if CHECK TABLE finds every table consistent; prints it otherwise.
tables_ok() {
  local check
  check="$(sql "CHECK TABLE $TABLES")"
  [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq "$expect_ok" ] || { echo "$check"; return 1; }
}
outcome "CHECK TABLE after the workloads" tables_ok

step "SIGKILL under a write load, restart, consistency"
# Four clients move money between 100 accounts and add a ledger row per
# transfer, each in one transaction, recording every commit the server
# acknowledged; sysbench's oltp_read_write runs beside them. After SIGKILL
# and restart: the balances still sum to the start (atomicity), every
# acknowledged ledger row is there (durability), and CHECK TABLE passes.
sql "CREATE TABLE sbtest.acct (id INT PRIMARY KEY, bal INT NOT NULL) ENGINE=SUBITO;
     CREATE TABLE sbtest.ledger (client INT, seq INT, PRIMARY KEY (client, seq)) ENGINE=SUBITO;
     INSERT INTO sbtest.acct WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100)
       SELECT n, 1000 FROM s"
TABLES="$TABLES, sbtest.acct, sbtest.ledger"
expect_ok=6
# One round: the load, SIGKILL, restart and the checks. Round r's ledger
# rows are r * 1000000 + n, so rounds never collide.
kill_round() {  # round, label
  local r=$1 label=$2 clients=() c load t0 t1 total lost=0 acked=0
  rm -f "$dir"/acked.* "$dir"/found.*
  for c in 1 2 3 4; do
    (
      n=$((r * 1000000))
      while :; do
        n=$((n + 1))
        a=$((RANDOM % 100 + 1))
        b=$((RANDOM % 100 + 1))
        if sql "BEGIN; UPDATE sbtest.acct SET bal = bal - 1 WHERE id = $a;
                UPDATE sbtest.acct SET bal = bal + 1 WHERE id = $b;
                INSERT INTO sbtest.ledger VALUES ($c, $n); COMMIT" 2>/dev/null; then
          echo "$n" >>"$dir/acked.$c"
        else
          [ -S "$sock" ] || break
          sleep 0.05
        fi
      done
    ) &
    clients+=($!)
  done
  "${SB[@]}" --threads=2 --time=30 oltp_read_write run >/dev/null 2>&1 &
  load=$!
  sleep 8
  bash scripts/server-stop.sh --dir "$dir" --kill
  kill "${clients[@]}" 2>/dev/null || true
  wait "${clients[@]}" "$load" 2>/dev/null || true
  t0=$(date +%s.%N)
  bash scripts/server-start.sh --dir "$dir" --port 3392 --pm-dir "/dev/shm/subito-test-$$" >/dev/null
  t1=$(date +%s.%N)
  echo "restart after SIGKILL: $(awk -v a="$t0" -v b="$t1" "BEGIN { printf \"%.2f\", b - a }") s to the first answered query"
  grep -h 'Subito: opened' "$dir/error.log" | tail -1 | sed 's/.*Subito: /Subito: /' || true
  outcome "after SIGKILL$label: CHECK TABLE" tables_ok
  total="$(sql "SELECT SUM(bal) FROM sbtest.acct")"
  echo "balances sum to $total (100000 before)"
  outcome "after SIGKILL$label: no transfer half applied" test "$total" = 100000
  for c in 1 2 3 4; do
    [ -f "$dir/acked.$c" ] || continue
    acked=$((acked + $(wc -l <"$dir/acked.$c")))
    sql "SELECT seq FROM sbtest.ledger WHERE client = $c AND seq > $((r * 1000000))
           AND seq < $(((r + 1) * 1000000))" | sort -n >"$dir/found.$c"
    lost=$((lost + $(sort -n "$dir/acked.$c" | comm -23 - "$dir/found.$c" | wc -l)))
  done
  echo "$acked commits acknowledged before the kill, $lost of them missing after the restart"
  outcome "after SIGKILL$label: every acknowledged commit kept" test "$acked" -gt 0 -a "$lost" -eq 0
}
kill_round 1 ""

step "SIGKILL after a start that made a new log (the PM tier cleared after a clean shutdown, as a reboot clears /dev/shm)"
bash scripts/server-stop.sh --dir "$dir" >/dev/null
rm -rf "/dev/shm/subito-test-$$"
bash scripts/server-start.sh --dir "$dir" --port 3392 --pm-dir "/dev/shm/subito-test-$$" >/dev/null
kill_round 2 " (new log)"
bash scripts/server-stop.sh --dir "$dir" >/dev/null
rm -rf "/dev/shm/subito-test-$$"

step "two-phase commit with the binary log, SIGKILL rounds (scripts/test-binlog.sh)"
sub_suite binlog scripts/test-binlog.sh

step "replication: a primary and a replica, SIGKILL of each (scripts/test-replication.sh)"
sub_suite replication scripts/test-replication.sh

step "backups: mariadb-dump under load, a cold copy (scripts/test-backup.sh)"
sub_suite backup scripts/test-backup.sh

step "MariaDB's storage_engine suite: Subito against InnoDB"
if bash scripts/test-storage-engine.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

step "differential SQL: the same statements on InnoDB and Subito"
if bash scripts/test-differential.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

step "many tables, bounded open page files"
if bash scripts/test-many-tables.sh --tables 2000 --open-files 50; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

step "disk full under sysbench"
if bash scripts/test-disk-full.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

echo
echo "plugin tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
