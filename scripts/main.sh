#!/usr/bin/env bash
# The main job: builds Subito and runs its sysbench-shaped workload through
# the embedded engine (scripts/bench-engine.sh), printing the summary table.
# Arguments go to the benchmark (e.g. --quick). The redo log's own benchmark
# is scripts/bench-log.sh. (Once the MariaDB plugin exists, this script will
# start a private server with it and run sysbench against it.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bench-engine.sh "$@"
