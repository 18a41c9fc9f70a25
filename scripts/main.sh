#!/usr/bin/env bash
# The main job: builds Subito and runs its benchmark with a readable summary.
# (Today the engine is its redo log; later layers extend this script.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bench-log.sh "$@"
