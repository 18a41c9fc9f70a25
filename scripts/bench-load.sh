#!/usr/bin/env bash
# Loading, Subito vs InnoDB in one run (bench/load.py): sysbench prepare's
# two phases (INSERTs, then CREATE INDEX k) timed apart, then LOAD DATA of a
# CSV and CREATE INDEX on it. 128 MB pools, both engines O_DIRECT. Writes
# out/load.json and out/load.png.
#
#   scripts/bench-load.sh [--quick] [--record] [--tables N] [--rows N] [--csv-rows N]
# --record: also writes the table and the plot into docs/results.md.
# About 10 minutes at full size (8 x 1M rows, a 1M-row CSV; --quick: 2).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
bash scripts/install-deps.sh
bash scripts/setup-mariadb.sh
bash scripts/install-deps.sh sysbench
mkdir -p out
/usr/bin/python3 bench/load.py "${args[@]}" | tee out/load.txt
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py load out/load.json img/load.png
  mkdir -p docs/img
  cp out/load.png docs/img/load.png
  echo "recorded in docs/results.md and docs/img/load.png"
fi
