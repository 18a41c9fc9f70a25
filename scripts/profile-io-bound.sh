#!/usr/bin/env bash
# Where the time goes in the I/O-bound regime (bench/profile_io_bound.py):
# one engine's server on bench-compare's regime (b) data, a sysbench
# workload, the machine's CPU split (user/system/idle/iowait), the server's
# disk I/O and a perf profile of its on-CPU time. Writes out/profile-ENGINE.txt.
#
#   scripts/profile-io-bound.sh [--engine subito|innodb] [--workload W] [--quick | --in-memory] [--seconds S]
# About 5 minutes at full size (most of it loading).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/install-deps.sh
bash scripts/setup-mariadb.sh
bash scripts/install-deps.sh sysbench linux-perf
mkdir -p out
/usr/bin/python3 bench/profile_io_bound.py "$@"
