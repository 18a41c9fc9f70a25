#!/usr/bin/env bash
# NV-PPL sweeps (bench/ppl_sweep.py): per-page log region size (0 = off, 1,
# 5, 10, 25% of the data) and threshold (64 B .. 4 KB) against tps and bytes
# per transaction on the I/O-bound sysbench data (8 x 1M rows, 128 MB pools),
# InnoDB measured in the same run. Writes out/ppl_sweep.json and .png.
#
#   scripts/bench-ppl-sweep.sh [--quick] [--record] [--seconds S] [--sizes ..] [--thresholds ..]
# --record: also writes the table and the plot into docs/results.md.
# About 25 minutes at full size (--quick: about 5).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
record=0
args=()
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
done
bash scripts/install-deps.sh
bash scripts/setup-mariadb.sh
bash scripts/install-deps.sh sysbench
mkdir -p out
/usr/bin/python3 bench/ppl_sweep.py "${args[@]}" | tee out/ppl_sweep.txt
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py ppl_sweep out/ppl_sweep.json img/ppl_sweep.png
  mkdir -p docs/img
  cp out/ppl_sweep.png docs/img/ppl_sweep.png
  echo "recorded in docs/results.md and docs/img/ppl_sweep.png"
fi
