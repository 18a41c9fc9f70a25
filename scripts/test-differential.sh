#!/usr/bin/env bash
# Differential SQL test: random statements against InnoDB and Subito tables
# of one private server (tests/differential/difftest.py), every result,
# affected-row count, warning and error compared.
#
#   scripts/test-differential.sh                 bounded run (CI): 40,000 statements
#   scripts/test-differential.sh --long          campaign: 1,000,000 statements
#   scripts/test-differential.sh [difftest.py options...]   e.g. --seeds 7 --print
#   scripts/test-differential.sh --seeds 11-30 --statements 300 --sessions 2
#                                                two sessions per engine, no lock waits
#                                                (exploratory: differences open, docs/results.md)
#
# Minimized reproductions of differences go to $SUBITO_DIFF_OUT (default
# /var/tmp/subito-difftest) as mtr tests of the subito suite, with the
# server's error log.
# Prints "differential: N statements, M seeds with differences".
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/install-deps.sh

ARGS=(--seeds 1-40 --statements 1000)
if [ "${1:-}" = "--long" ]; then
  shift
  ARGS=(--seeds 1001-2000 --statements 1000)
fi
[ $# -gt 0 ] && ARGS=("$@")

OUT="${SUBITO_DIFF_OUT:-/var/tmp/subito-difftest}"
mkdir -p "$OUT"
dir="$(mktemp -d /var/tmp/subito-diff.XXXXXX)"
pm="/dev/shm/subito-diff-$$"
cleanup() {
  cp "$dir/error.log" "$OUT/error.log" 2>/dev/null || true
  bash scripts/server-stop.sh --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir" "$pm"
}
trap cleanup EXIT
# Small pools: this test compares results, not speed.
bash scripts/server-start.sh --dir "$dir" --port "${SUBITO_DIFF_PORT:-3393}" --pm-dir "$pm" -- \
  --innodb-buffer-pool-size=64M --subito-buffer-pool-size=64M
/usr/bin/python3 tests/differential/difftest.py --socket "$dir/mysqld.sock" --out "$OUT" "${ARGS[@]}"
