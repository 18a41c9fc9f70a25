#!/usr/bin/env bash
# CH-benCHmark (bench/ch.py): go-tpc's TPC-C with analytical queries at once,
# Subito vs InnoDB in the same server build, in one run: tpmC, NEW_ORDER p99,
# each query's mean latency, peak server memory and what old versions hold.
# Writes out/ch.json and out/ch.txt; --record also writes the section of
# docs/results.md.
#
#   scripts/bench-ch.sh [--record] [--warehouses W] [--threads T] [--seconds S] [--version-budget 32M]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/install-deps.sh
bash scripts/setup-mariadb.sh
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
GOTPC="$(bash scripts/build-go-tpc.sh)"
mkdir -p out
/usr/bin/python3 bench/ch.py --go-tpc "$GOTPC" "${args[@]}" | tee out/ch.txt
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py ch out/ch.json -
  echo "recorded in docs/results.md"
fi
