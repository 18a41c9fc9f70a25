#!/usr/bin/env bash
# Instructions per transaction, Subito against InnoDB, under callgrind
# (bench/callgrind_profile.py): repeatable where timed profiles are not.
# Writes out/callgrind-profile.{txt,json} and the dumps
# out/callgrind-ENGINE-WORKLOAD.out (for callgrind_annotate).
#
#   scripts/profile-callgrind.sh [--record] [--events N] [--workloads W,W] [--engines subito,innodb]
# --record: also writes the table into docs/results.md. About 3 minutes.
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
bash scripts/install-deps.sh sysbench valgrind
mkdir -p out
/usr/bin/python3 bench/callgrind_profile.py "${args[@]}"
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py cpu_profile out/callgrind-profile.json none
fi
