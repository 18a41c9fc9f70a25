#!/usr/bin/env bash
# NV-PPL sweeps (bench/ppl_sweep.py): per-page log region size (0 = off, 1,
# 5, 10, 25% of the data) and threshold (64 B .. 4 KB) against tps and bytes
# per transaction on the I/O-bound sysbench data (8 x 1M rows, 128 MB pools),
# InnoDB measured in the same run. Writes out/ppl_sweep.json and .png.
#
#   scripts/bench-ppl-sweep.sh [--quick] [--record] [--seconds S] [--sizes ..] [--thresholds ..]
# --record: also writes the table and the plot into docs/results.md.
# About 25 minutes at full size (--quick: about 5).
exec bash "$(dirname "$0")/run-server-bench.sh" ppl_sweep "$@"
