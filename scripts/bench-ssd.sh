#!/usr/bin/env bash
# Subito vs InnoDB, I/O-bound, on the NV-PPL seed's SSD (bench/compare.py
# regimes b, g, c, h): (b) sysbench on 8 x 1M rows with 128 MB pools and (c)
# TPC-C, as scripts/bench-compare.sh runs them, then (g) and (h): (b)'s write
# workloads and (c) again on the same servers and data with the server's
# write operations to the data directory's device capped at the seed's
# SSD's random-write rate (28K 4-KiB writes per second, as 16-KiB pages:
# 7,000 per second; --write-cap IOPS to change it) by the kernel's block
# throttle, for both engines, after --cap-settle seconds (20) of load under
# the cap. Needs root (cgroups). Writes out/ssd/compare.json and .png; about
# 40 minutes (--quick: about 6).
#
#   scripts/bench-ssd.sh [--quick] [--record] [--seconds S] [--write-cap IOPS]
# --record: also writes the table and the plot into docs/results.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUBITO_COMPARE_AS=ssd exec bash "$ROOT/scripts/bench-compare.sh" --regimes bgch --seconds 30 "$@"
