#!/usr/bin/env bash
# Disk full, as a DBA meets it: Subito's data directory lies on a tmpfs of
# fixed size (default 48 MB) that sysbench's inserts fill up. What must hold
# (docs/faults.md):
#   - the inserts that need a new page fail with ER_RECORD_FILE_FULL ("The
#     table ... is full", 1114), as InnoDB's do, and the server goes on;
#   - reads answer, and writes that need no new page (updates in place of
#     another table) succeed;
#   - once space is freed, inserts succeed again without a restart;
#   - CHECK TABLE passes, and after a restart every row is there.
# Needs root (mount). Usage: scripts/test-disk-full.sh [--size-mb N]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SIZE_MB=48
while [ $# -gt 0 ]; do
  case "$1" in
    --size-mb) SIZE_MB="$2"; shift 2 ;;
    *) echo "test-disk-full: unknown option $1" >&2; exit 2 ;;
  esac
done

dir="$(mktemp -d /var/tmp/subito-diskfull.XXXXXX)"
pm="/dev/shm/subito-diskfull-$$"
start() {
  bash scripts/server-start.sh --dir "$dir" --port 3393 --pm-dir "$pm" -- \
    --subito-buffer-pool-size=32M >/dev/null
}
# A first start makes the datadir; Subito's directory in it (data/#subito)
# then becomes the small file system, and the engine starts afresh there.
start
bash scripts/server-stop.sh --dir "$dir" >/dev/null
small="$dir/data/#subito"
rm -rf "$small" "$pm"
mkdir -p "$small"
mount -t tmpfs -o "size=${SIZE_MB}m,mode=0700" tmpfs "$small"
pmsmall="$dir/pmsmall"
cleanup() {
  bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true
  umount "$small" 2>/dev/null || true
  umount "$pmsmall" 2>/dev/null || true
  rm -rf "$dir" "$pm"
}
trap cleanup EXIT
start
sock="$dir/mysqld.sock"
sql() { mariadb --no-defaults --socket="$sock" -uroot -N -e "$1"; }
failures=0
outcome() {  # description, command...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

sql "CREATE DATABASE sbtest; USE sbtest; CREATE TABLE sbtest.roomy (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=SUBITO;
     INSERT INTO sbtest.roomy SELECT seq, 0 FROM seq_1_to_100"
# Space to free later: a file on the same file system.
fallocate -l 4M "$small/filler"
SB=(sysbench --db-driver=mysql --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest
    --mysql-storage-engine=subito --tables=2 --table-size=1000 --report-interval=0)
"${SB[@]}" oltp_common prepare >/dev/null
echo "filling $SIZE_MB MB with oltp_insert (4 threads, ER_RECORD_FILE_FULL ignored) until it is full"
# sysbench retries an event that met an ignored error without looking at
# the clock, so it is stopped from outside, once the server's error log
# shows the tables full for a while (at most 5 minutes in all).
"${SB[@]}" --threads=4 --time=0 --mysql-ignore-errors=1114 oltp_insert run >/dev/null 2>&1 &
sb=$!
full_since=0
for ((s = 0; s < 300; s++)); do
  sleep 1
  if grep -q "The table 'sbtest[0-9]*' is full" "$dir/error.log"; then
    full_since=$((full_since + 1))
    [ "$full_since" -ge 5 ] && break
  fi
done
kill -9 "$sb" 2>/dev/null || true
wait "$sb" 2>/dev/null || true
ignored="$(grep -c "The table 'sbtest[0-9]*' is full" "$dir/error.log" || true)"
df -h "$small" | tail -1
outcome "inserts failed with ER_RECORD_FILE_FULL once the file system was full ($ignored times)" \
  test "$ignored" -gt 0
msg="$(mariadb --no-defaults --socket="$sock" -uroot -e \
  "USE sbtest; INSERT INTO sbtest.sbtest1 (k, c, pad) SELECT seq, REPEAT('c', 120), REPEAT('p', 60) FROM seq_1_to_20000" 2>&1 || true)"
echo "$msg" | grep ERROR || true
outcome "the client sees \"The table ... is full\"" grep -q "ERROR 1114 .* is full" <<<"$msg"
outcome "the server answers reads" test "$(sql "SELECT COUNT(*) > 1000 FROM sbtest.sbtest1")" = 1
outcome "writes that need no new page succeed" \
  sql "UPDATE sbtest.roomy SET n = n + 1"
outcome "SHOW ENGINE SUBITO STATUS: writes accepted" \
  grep -q "writes: accepted" <<<"$(sql "SHOW ENGINE SUBITO STATUS")"
rm -f "$small/filler"
before="$(sql "SELECT COUNT(*) FROM sbtest.sbtest1")"
outcome "inserts succeed again once space is freed (no restart)" \
  sql "USE sbtest; INSERT INTO sbtest.sbtest1 (k, c, pad) SELECT seq, 'c', 'p' FROM seq_1_to_500"
after="$(sql "SELECT COUNT(*) FROM sbtest.sbtest1")"
outcome "the 500 rows are there ($before -> $after)" test "$after" -eq $((before + 500))
check="$(sql "CHECK TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.roomy" | awk '{print $NF}' | sort -u)"
outcome "CHECK TABLE: OK" test "$check" = "OK"
sums="$(sql "CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.roomy")"
bash scripts/server-stop.sh --dir "$dir" >/dev/null
start
outcome "after a restart every row is there" test "$(sql "CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.roomy")" = "$sums"
outcome "roomy was updated once" test "$(sql "SELECT MIN(n), MAX(n) FROM sbtest.roomy")" = "$(printf '1\t1')"

# The PM tier full at a start: the redo log cannot be created. The engine is
# disabled with the reason in the error log while the server runs on; once
# the PM tier has room, the next start creates a log and every row is there.
bash scripts/server-stop.sh --dir "$dir" >/dev/null
mkdir -p "$pmsmall"
mount -t tmpfs -o size=8m,mode=0700 tmpfs "$pmsmall"
pm_start() {
  bash scripts/server-start.sh --dir "$dir" --port 3393 --pm-dir "$pmsmall/pm" -- \
    --subito-buffer-pool-size=32M >/dev/null 2>&1
}
if pm_start; then started=1; else started=0; fi
outcome "with the PM tier full the engine does not start" test "$started" = 0
outcome "the error log says why" grep -q "Subito: cannot open the engine.*No space left on device" \
  "$dir/error.log"
outcome "the server runs on without it" \
  mariadb-admin --no-defaults --socket="$sock" -uroot ping
bash scripts/server-stop.sh --dir "$dir" >/dev/null
umount "$pmsmall"
# Room for the default log (256 MiB) and per-page log region (256 MiB).
mount -t tmpfs -o size=1g,mode=0700 tmpfs "$pmsmall"
outcome "with room in the PM tier it starts" pm_start
outcome "and every row is there" test "$(sql "CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2, sbtest.roomy")" = "$sums"
[ "$failures" -eq 0 ] && echo "disk full: all checks passed" || { echo "disk full: $failures checks failed"; exit 1; }
