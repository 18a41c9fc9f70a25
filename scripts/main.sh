#!/usr/bin/env bash
# The main job, on a fresh machine: installs Debian's MariaDB server (pinned)
# and builds the Subito plugin for it, starts a private server with Subito,
# creates a Subito table and queries it, then runs a short sysbench
# comparison of Subito and InnoDB tables in that same server and prints it.
# The server keeps running afterwards (connection and stop commands are
# printed at the end).
#
#   scripts/main.sh [--seconds S] [--threads T]
# The full comparison (regimes a-e) is scripts/bench-compare.sh; the
# embedded engine's own benchmark is scripts/bench-engine.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SECS=15
THREADS=4
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    *) echo "main: unknown option $1" >&2; exit 2 ;;
  esac
done

step() { printf '\n=== %s\n' "$*"; }
step "1/4 MariaDB 10.11.18 (Debian) and the Subito plugin"
bash scripts/setup-mariadb.sh
export DEBIAN_FRONTEND=noninteractive
dpkg-query -W -f='${Status}' sysbench 2>/dev/null | grep -q "install ok installed" ||
  apt-get install -y -qq --no-upgrade sysbench >/dev/null

step "2/4 a private server with Subito"
DIR="${SUBITO_SERVER_DIR:-/var/tmp/subito-server}"
PORT="${SUBITO_SERVER_PORT:-3391}"
if [ -f "$DIR/mysqld.pid" ] && kill -0 "$(cat "$DIR/mysqld.pid")" 2>/dev/null; then
  echo "main: restarting the server in $DIR (to load the plugin just built)"
  bash scripts/server-stop.sh --dir "$DIR"
fi
bash scripts/server-start.sh --dir "$DIR" --port "$PORT"
SOCK="$DIR/mysqld.sock"
sql() { mariadb --no-defaults --socket="$SOCK" -uroot "$@"; }

step "3/4 a Subito table answering queries"
sql -t <<'SQL'
CREATE DATABASE IF NOT EXISTS demo;
USE demo;
DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
  id INT AUTO_INCREMENT PRIMARY KEY,
  customer VARCHAR(40) NOT NULL,
  placed DATE NOT NULL,
  total DECIMAL(10, 2) NOT NULL,
  KEY by_customer (customer, placed)
) ENGINE=SUBITO;
INSERT INTO orders (customer, placed, total) VALUES
  ('Ada', '2026-11-01', 120.50), ('Grace', '2026-11-02', 75.00),
  ('ada', '2026-11-20', 19.99), ('Linus', '2026-11-21', 250.00);
SELECT ENGINE, TABLE_ROWS FROM information_schema.TABLES
 WHERE TABLE_SCHEMA = 'demo' AND TABLE_NAME = 'orders';
SELECT customer, COUNT(*) AS orders, SUM(total) AS spent
  FROM orders WHERE customer = 'ADA' GROUP BY customer;
EXPLAIN SELECT * FROM orders WHERE customer = 'Grace';
SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
 WHERE VARIABLE_NAME IN ('SUBITO_COMMITS', 'SUBITO_LOG_BYTES', 'SUBITO_PM_BYTES_WRITTEN');
SQL

step "4/4 sysbench: Subito and InnoDB tables in this server ($THREADS threads, ${SECS} s per workload)"
sql -e "DROP DATABASE IF EXISTS sb_subito; DROP DATABASE IF EXISTS sb_innodb;
        CREATE DATABASE sb_subito; CREATE DATABASE sb_innodb"
declare -A tps
for engine in subito innodb; do
  SB=(sysbench --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db="sb_$engine"
      --mysql-storage-engine="$engine" --tables=2 --table-size=20000 --report-interval=0)
  echo "loading 2 x 20000 rows into $engine tables"
  "${SB[@]}" oltp_common prepare >/dev/null
  for w in oltp_point_select oltp_write_only oltp_read_write; do
    printf '  %-8s %-18s ' "$engine" "$w"
    out="$("${SB[@]}" --threads="$THREADS" --time="$SECS" "$w" run)"
    t="$(echo "$out" | sed -nE 's/.*transactions: +[0-9]+ +\(([0-9.]+) per sec.*/\1/p')"
    tps["$engine/$w"]="$t"
    echo "$t tps"
  done
done
echo
printf '%-20s %12s %12s %10s\n' workload "Subito tps" "InnoDB tps" ratio
for w in oltp_point_select oltp_write_only oltp_read_write; do
  s="${tps[subito/$w]}"
  i="${tps[innodb/$w]}"
  printf '%-20s %12s %12s %9sx\n' "$w" "$s" "$i" "$(awk -v s="$s" -v i="$i" 'BEGIN { printf "%.2f", s / i }')"
done
echo "(InnoDB here: the server's defaults, innodb_flush_log_at_trx_commit=1; the"
echo " equal-resources comparison with PM-tier settings is scripts/bench-compare.sh)"
echo
echo "The server keeps running:"
echo "  mariadb --socket=$SOCK -uroot demo      # or: mariadb -h127.0.0.1 -P$PORT -uroot"
echo "  bash scripts/server-stop.sh             # stops it"
