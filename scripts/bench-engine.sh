#!/usr/bin/env bash
# Builds Subito (release) and runs the sysbench-shaped engine benchmark: prints
# a table, writes out/engine_bench.json and out/engine_bench.png.
# Usage: scripts/bench-engine.sh [--record] [--quick] [engine_bench options:
#          --tables N, --rows M, --threads T, --seconds S, --pool-mb MB,
#          --log-mode nf|classic, --workloads a,b,..., --dir D, --pm-dir P]
#   --record  also rewrites the engine section of docs/results.md and its plot
#   --quick   a smoke run (5000 rows per table, 1.5 s per workload; under a minute)
# SUBITO_BUILD_DIR overrides the build directory (default build-release).
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
build="${SUBITO_BUILD_DIR:-build-release}"
bash scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" engine_bench >/dev/null
mkdir -p out
"./$build/engine_bench" --json out/engine_bench.json "${args[@]}"
/usr/bin/python3 bench/plot_engine_bench.py out/engine_bench.json out/engine_bench.png
if [ "$record" = 1 ]; then
  mkdir -p docs/img
  cp out/engine_bench.png docs/img/engine_bench.png
  /usr/bin/python3 bench/render_results.py engine_bench out/engine_bench.json img/engine_bench.png
fi
