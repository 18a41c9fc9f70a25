#!/usr/bin/env bash
# Subito vs InnoDB in the same MariaDB server build, in one run (bench/compare.py):
# (a) in memory, (b) I/O-bound, (c) TPC-C, (d) bulk load, (e) restart after
# SIGKILL, (f) (a) with commits not durable for both (the ceiling). Prints
# each figure for both engines and the ratio; writes out/compare.json and
# out/compare.png.
#
#   scripts/bench-compare.sh [--quick] [--record] [--threads T] [--seconds S] [--regimes abcdef]
# --quick: small data and short runs (about 15 minutes); without it, the
# sizes of the issue: (a) 8 x 100k rows, 4 GB pools; (b) 8 x 1M rows, 128 MB
# pools; (c) 10 warehouses, 128 MB pools (about an hour and a half).
# --record: also writes the table and the plot into docs/results.md.
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
GOTPC="$(bash scripts/build-go-tpc.sh)"
# SUBITO_COMPARE_AS=ssd (scripts/bench-ssd.sh): the output in out/ssd, the
# record in the compare_ssd section of docs/results.md.
as="${SUBITO_COMPARE_AS:-}"
out="out${as:+/$as}"
section="compare${as:+_$as}"
img="compare${as:+-$as}.png"
mkdir -p "$out"
/usr/bin/python3 bench/compare.py --go-tpc "$GOTPC" --out "$out" "${args[@]}" | tee "$out/compare.txt"
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py "$section" "$out/compare.json" "img/$img"
  mkdir -p docs/img
  cp "$out/compare.png" "docs/img/$img"
  echo "recorded in docs/results.md and docs/img/$img"
fi
