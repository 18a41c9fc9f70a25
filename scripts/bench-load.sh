#!/usr/bin/env bash
# Loading, Subito vs InnoDB in one run (bench/load.py): sysbench prepare's
# two phases (INSERTs, then CREATE INDEX k) timed apart, then LOAD DATA of a
# CSV and CREATE INDEX on it. 128 MB pools, both engines O_DIRECT. Writes
# out/load.json and out/load.png.
#
#   scripts/bench-load.sh [--quick] [--record] [--tables N] [--rows N] [--csv-rows N]
# --record: also writes the table and the plot into docs/results.md.
# About 10 minutes at full size (8 x 1M rows, a 1M-row CSV; --quick: 2).
exec bash "$(dirname "$0")/run-server-bench.sh" load "$@"
