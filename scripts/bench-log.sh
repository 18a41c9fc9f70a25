#!/usr/bin/env bash
# Builds Subito (release) and runs the redo-log benchmark: prints a table and
# the targets, writes out/log_bench.json and out/log_bench.png.
# Usage: scripts/bench-log.sh [log_bench options, e.g. --quick, --seconds 2, --dir /mnt/pmem/x]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-release log_bench >/dev/null
mkdir -p out
./build-release/log_bench --json out/log_bench.json "$@"
/usr/bin/python3 bench/plot_log_bench.py out/log_bench.json out/log_bench.png
