#!/usr/bin/env bash
# Parallel log streams in the server (bench/streams.py): sysbench's load and
# oltp_write_only with subito_log_streams = 1, 2, 4, 8, a fresh server each,
# in rounds of alternating order. Writes out/streams.{json,png}.
#
#   scripts/bench-streams.sh [--record] [--streams 1,2,4,8] [--rounds N] [--rows N] [--seconds N]
# --record: also writes the table and the plot into docs/results.md.
# About 12 minutes with the defaults (8 x 250k rows, 2 rounds, 30 s runs).
exec bash "$(dirname "$0")/run-server-bench.sh" streams "$@"
