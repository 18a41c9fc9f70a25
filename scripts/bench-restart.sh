#!/usr/bin/env bash
# Restart after SIGKILL, Subito vs InnoDB in one run (bench/restart.py):
# data of 1, 4 and 16 GB, redo logs of 256 MB, 1 GB and 4 GB; for each, a
# write load, SIGKILL, the time to the first answered query on the engine's
# table (the server's own start-up measured apart) and the throughput after
# it. Writes out/restart.json and out/restart.png.
#
#   scripts/bench-restart.sh [--quick] [--record] [--sizes-gb 1,4,16] [--logs 256M,1G,4G]
#                            [--pool 1G] [--load-seconds 60] [--after-seconds 30]
#                            [--dump-interval S] [--engines subito,innodb] [--pin] [--out DIR]
# --record: also writes the table and the plot into docs/results.md.
# --pin: the server on the upper half of the CPUs, sysbench on the lower half
# (after the load): unpinned, the throughput swings in scheduling phases.
# About 3 hours at full size (the 16 GB loads dominate); --quick (0.25 GB,
# logs of 64 and 256 MB): about 10 minutes.
exec bash "$(dirname "$0")/run-server-bench.sh" restart "$@"
