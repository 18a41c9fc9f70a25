#!/usr/bin/env bash
# The embedded engine beside RocksDB and LMDB, no server in between
# (bench/kv_compare.cc, issue 13): point reads, updates and inserts with
# durable commits, at 1 and 2 threads. Prints a table, writes
# out/kv_compare.json and out/kv_compare.png.
# Usage: scripts/bench-embedded.sh [--record] [kv_compare options:
#          --rows N, --seconds S, --cache-mb MB, --engines a,b, --threads 1,2,
#          --workloads read,update,insert, --dir D, --pm-dir P]
#   --record  also rewrites the kv_compare section of docs/results.md and its plot
# About 5 minutes with the defaults (1,000,000 keys, 10 s per point).
# SUBITO_BUILD_DIR overrides the build directory (default build-release).
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
build="${SUBITO_BUILD_DIR:-build-release}"
bash scripts/install-deps.sh librocksdb-dev liblmdb-dev
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" kv_compare >/dev/null
mkdir -p out
"./$build/kv_compare" --json out/kv_compare.json "${args[@]}"
/usr/bin/python3 bench/plot_kv_compare.py out/kv_compare.json out/kv_compare.png
if [ "$record" = 1 ]; then
  mkdir -p docs/img
  cp out/kv_compare.png docs/img/kv_compare.png
  /usr/bin/python3 bench/render_results.py kv_compare out/kv_compare.json img/kv_compare.png
fi
