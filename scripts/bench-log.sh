#!/usr/bin/env bash
# Builds Subito (release) and runs the redo-log benchmark: prints a table and
# the targets, writes out/log_bench.json and out/log_bench.png.
# Usage: scripts/bench-log.sh [--record] [log_bench options: --quick, --seconds S, --dir D]
#   --record  also rewrites the log section of docs/results.md and its plot
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-release log_bench >/dev/null
mkdir -p out
./build-release/log_bench --json out/log_bench.json "${args[@]}"
/usr/bin/python3 bench/plot_log_bench.py out/log_bench.json out/log_bench.png
if [ "$record" = 1 ]; then
  mkdir -p docs/img
  cp out/log_bench.png docs/img/log_bench.png
  /usr/bin/python3 bench/render_results.py log_bench out/log_bench.json img/log_bench.png
fi
