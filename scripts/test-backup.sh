#!/usr/bin/env bash
# Backups of Subito tables (docs/mariadb.md, "Replication and backups"):
#   logical: mariadb-dump --single-transaction while four clients move money
#            and sysbench writes; the dump restored into a fresh server holds
#            a consistent state (balances sum to the start, CHECK TABLE) and
#            dumps again to the same bytes;
#   physical (online): BACKUP STAGE START .. BLOCK_COMMIT under the same
#            load, the data and PM directories copied (the log last), END
#            (tests/binlog/online_backup.py); the copy started as a server:
#            checksums equal the original's under BLOCK_COMMIT, one moment
#            across tables, every commit acknowledged before it there, an
#            XA transaction prepared before it still prepared;
#   physical (cold): a clean shutdown, the data directory and the PM
#            directory copied, the copy started as a second server: every
#            table's CHECKSUM equals the original's, and an XA transaction
#            left prepared at the shutdown is prepared in the copy too.
# Prints "backup tests: N passed, M failed"; fails if any failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-mariadb.sh >/dev/null
bash scripts/install-deps.sh sysbench

work="$(mktemp -d /var/tmp/subito-backup.XXXXXX)"
A="$work/a"
B="$work/b"
C="$work/c"
D="$work/d"
pm="/dev/shm/subito-backup-$$"
trap 'for d in "$A" "$B" "$C" "$D"; do bash scripts/server-stop.sh --dir "$d" >/dev/null 2>&1 || true; done;
      rm -rf "$work" "$pm"-*' EXIT
OPTS=(-- --default-storage-engine=SUBITO --subito-lock-wait-timeout=10)
sqla() { mariadb --no-defaults --socket="$A/mysqld.sock" -uroot -N -e "$1"; }
sqlb() { mariadb --no-defaults --socket="$B/mysqld.sock" -uroot -N -e "$1"; }
sqlc() { mariadb --no-defaults --socket="$C/mysqld.sock" -uroot -N -e "$1"; }
source scripts/test-lib.sh
TABLES="sbtest.acct, sbtest.ledger, sbtest.counts, sbtest.sbtest1, sbtest.sbtest2"
tables_ok() {  # sql function
  local check
  check="$("$1" "CHECK TABLE $TABLES")"
  [ "$(echo "$check" | awk '$3 == "status" && $4 == "OK"' | wc -l)" -eq 5 ] || { echo "$check"; return 1; }
}

bash scripts/server-start.sh --dir "$A" --port 3397 --pm-dir "$pm-a" "${OPTS[@]}" >/dev/null
mariadb --no-defaults --socket="$A/mysqld.sock" -uroot <tests/binlog/schema.sql
SB=(sysbench --db-driver=mysql --mysql-socket="$A/mysqld.sock" --mysql-user=root --mysql-db=sbtest
    --mysql-storage-engine=subito --tables=2 --table-size=20000 --report-interval=0)
"${SB[@]}" oltp_common prepare >/dev/null

echo "== logical: mariadb-dump --single-transaction under a write load"
clients=()
for c in 1 2 3 4; do
  /usr/bin/python3 tests/binlog/two_phase.py load --socket "$A/mysqld.sock" --client "$c" --round 1 \
    --acked "$work/acked.$c" &
  clients+=($!)
done
"${SB[@]}" --threads=2 --time=600 --mysql-ignore-errors=all oltp_write_only run >/dev/null 2>&1 &
sb=$!
sleep 3
before="$(sqla "SELECT COUNT(*) FROM sbtest.ledger")"
mariadb-dump --no-defaults --socket="$A/mysqld.sock" -uroot --single-transaction --skip-dump-date \
  --databases sbtest >"$work/dump.sql"
after="$(sqla "SELECT COUNT(*) FROM sbtest.ledger")"
echo "the dump ran while the ledger grew from $before to $after rows"
outcome "logical: the ledger grew while the dump ran (it ran under load)" test "$after" -gt "$before"
bash scripts/server-start.sh --dir "$B" --port 3398 --pm-dir "$pm-b" "${OPTS[@]}" >/dev/null
mariadb --no-defaults --socket="$B/mysqld.sock" -uroot <"$work/dump.sql"
outcome "logical: the restored tables are Subito's" \
  test "$(sqlb "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND ENGINE = 'SUBITO'")" = 5
total="$(sqlb "SELECT SUM(bal) FROM sbtest.acct")"
echo "restored balances sum to $total; ledger rows: $(sqlb "SELECT COUNT(*) FROM sbtest.ledger")"
outcome "logical: balances sum to the start in the dump" test "$total" = 100000
# Each transfer raises its client's count in another table in the same
# transaction: counts equal ledger rows only if every table was dumped as
# of one snapshot.
off="$(sqlb "SELECT COUNT(*) FROM sbtest.counts c
               WHERE c.n <> (SELECT COUNT(*) FROM sbtest.ledger l WHERE l.client = c.client)")"
echo "restored counts: $(sqlb "SELECT GROUP_CONCAT(n ORDER BY client) FROM sbtest.counts")"
outcome "logical: the dump is one snapshot across tables (counts equal ledger rows)" test "$off" = 0
outcome "logical: CHECK TABLE of the restored tables" tables_ok sqlb
mariadb-dump --no-defaults --socket="$B/mysqld.sock" -uroot --single-transaction --skip-dump-date \
  --databases sbtest >"$work/dump2.sql"
outcome "logical: the restored tables dump to the same bytes" cmp -s "$work/dump.sql" "$work/dump2.sql"

echo "== physical (online): BACKUP STAGE under the same write load, the files copied meanwhile"
# The prepared transaction moves money between two accounts the clients never
# pick (they pick 1..100): on theirs, its row locks would stall every client
# in turn for the lock wait timeout, and the load would stop around the backup.
sqla "INSERT INTO sbtest.acct VALUES (101, 0), (102, 0)"
sqla "XA START 'online'; UPDATE sbtest.acct SET bal = bal - 5 WHERE id = 101;
      UPDATE sbtest.acct SET bal = bal + 5 WHERE id = 102; XA END 'online'; XA PREPARE 'online'"
mkdir -p "$D"
before="$(sqla "SELECT COUNT(*) FROM sbtest.ledger")"
/usr/bin/python3 tests/binlog/online_backup.py --socket "$A/mysqld.sock" --data-dir "$A/data" \
  --pm-dir "$pm-a" --to "$D" --tables "$TABLES" --checksums "$work/online.sums" \
  --acked-glob "$work/acked.*"
after="$(sqla "SELECT COUNT(*) FROM sbtest.ledger")"
echo "the ledger grew from $before to $after rows around the backup"
outcome "online: writes went on around the backup" test "$after" -gt "$before"
sqla "XA ROLLBACK 'online'"
bash scripts/server-start.sh --dir "$D" --port 3400 --pm-dir "$D/pm" "${OPTS[@]}" >/dev/null
grep -h 'Subito: opened' "$D/error.log" | tail -1 | cut -c1-240
sqld() { mariadb --no-defaults --socket="$D/mysqld.sock" -uroot -N -e "$1"; }
sqld "CHECKSUM TABLE $TABLES" | awk '{ printf "  %s %s\n", $1, $2 }'
outcome "online: every table's checksum in the copy equals the original's under BLOCK_COMMIT" \
  test "$(sqld "CHECKSUM TABLE $TABLES" | tr '\t' ' ')" = "$(tr '\t' ' ' <"$work/online.sums")"
outcome "online: balances sum to the start in the copy" \
  test "$(sqld "SELECT SUM(bal) FROM sbtest.acct")" = 100000
outcome "online: counts equal ledger rows in the copy (one moment across tables)" \
  test "$(sqld "SELECT COUNT(*) FROM sbtest.counts c
                WHERE c.n <> (SELECT COUNT(*) FROM sbtest.ledger l WHERE l.client = c.client)")" = 0
acked_in_copy() {
  local c n=0 lost=0
  for c in 1 2 3 4; do
    [ -f "$D/acked.$c" ] || continue
    n=$((n + $(wc -l <"$D/acked.$c")))
    sqld "SELECT seq FROM sbtest.ledger WHERE client = $c" | sort -n >"$work/online.found.$c"
    lost=$((lost + $(sort -n "$D/acked.$c" | comm -23 - "$work/online.found.$c" | wc -l)))
  done
  echo "  $n commits acknowledged before BLOCK_COMMIT, $lost of them missing in the copy"
  [ "$n" -gt 0 ] && [ "$lost" -eq 0 ]
}
outcome "online: every commit acknowledged before BLOCK_COMMIT is in the copy" acked_in_copy
outcome "online: the XA transaction prepared before the backup is prepared in the copy" \
  test "$(sqld "XA RECOVER" | awk '{ print $4 }')" = online
sqld "XA COMMIT 'online'"
outcome "online: and its XA COMMIT there keeps the sum" \
  test "$(sqld "SELECT SUM(bal) FROM sbtest.acct")" = 100000
outcome "online: CHECK TABLE in the copy" tables_ok sqld
bash scripts/server-stop.sh --dir "$D" >/dev/null

kill "$sb" "${clients[@]}" 2>/dev/null || true
wait "$sb" "${clients[@]}" 2>/dev/null || true
for _ in $(seq 1 300); do  # a COMMIT sent before its client stopped may still run
  [ "$(sqla "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'root' AND ID <> CONNECTION_ID()")" = 0 ] && break
  sleep 0.1
done

echo "== physical (cold): a clean shutdown, the data and PM directories copied"
sqla "XA START 'kept'; UPDATE sbtest.acct SET bal = bal - 5 WHERE id = 1; XA END 'kept'; XA PREPARE 'kept'"
sums="$(sqla "CHECKSUM TABLE $TABLES")"
bash scripts/server-stop.sh --dir "$A" >/dev/null
mkdir -p "$C"
cp -a "$A/data" "$C/data"
cp -a "$pm-a" "$pm-c"
bash scripts/server-start.sh --dir "$C" --port 3399 --pm-dir "$pm-c" "${OPTS[@]}" >/dev/null
copy_sums="$(sqlc "CHECKSUM TABLE $TABLES")"
echo "$copy_sums" | awk '{ printf "  %s %s\n", $1, $2 }'
outcome "physical: every table's checksum equal in the copy" test "$sums" = "$copy_sums"
outcome "physical: the prepared XA transaction is prepared in the copy" \
  test "$(sqlc "XA RECOVER" | awk '{ print $4 }')" = kept
bal="$(sqlc "SELECT bal FROM sbtest.acct WHERE id = 1")"
sqlc "XA COMMIT 'kept'"
outcome "physical: and its XA COMMIT there takes 5 from account 1 ($bal before)" \
  test "$(sqlc "SELECT bal FROM sbtest.acct WHERE id = 1")" = "$((bal - 5))"
outcome "physical: CHECK TABLE in the copy" tables_ok sqlc
echo "backup tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
