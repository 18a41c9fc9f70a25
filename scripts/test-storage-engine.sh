#!/usr/bin/env bash
# MariaDB's own suite for engine writers (suite/storage_engine in Debian's
# mariadb-test), run for Subito through the overlay in
# mariadb/mysql-test/overlay/storage_engine and, with the same harness in
# the same run, for InnoDB through its own overlay. The suite's 10.11
# results are partly stale, so the rule is relative: Subito must pass every
# test InnoDB passes, except those its overlay disables (each a known
# difference in docs/mariadb.md), which are listed.
# Prints "storage_engine: Subito passes N, InnoDB passes M, ..." and fails
# if a test InnoDB passes fails on Subito.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MTR_DIR=/usr/share/mysql/mysql-test
ln -sfn "$ROOT/mariadb/mysql-test/overlay" "$MTR_DIR/plugin/subito"
# A run that was killed leaves its vardir (gigabytes) in /dev/shm, the PM
# tier's home: those of runs no longer alive go.
for stale in /dev/shm/subito-se-*-*; do
  [ -d "$stale" ] || continue
  [ -d "/proc/${stale##*-}" ] || rm -rf "$stale" || true
done

run() {  # overlay name -> "test result" lines
  local vardir="/dev/shm/subito-se-$1-$$"
  (cd "$MTR_DIR" && ./mtr --vardir="$vardir" --force --max-test-fail=0 --retry=0 --parallel=1 \
     --suite="storage_engine-$1" 2>&1) |
    sed -nE "s/^storage_engine-$1\.([a-z_0-9]+) +\[ (pass|fail|skipped|disabled) \].*/\1 \2/p" | sort -u
  rm -rf "$vardir"
  # mtr writes .reject files next to the suite's results.
  find "$MTR_DIR/suite/storage_engine" -name '*.reject' -delete
}
subito="$(run subito)"
innodb="$(run innobase)"
passes() { echo "$1" | awk '$2 == "pass" { print $1 }' | sort -u; }
disabled="$(sed -nE 's/^([a-z_0-9]+) *:.*/\1/p' "$ROOT/mariadb/mysql-test/overlay/storage_engine/disabled.def" | sort -u)"
missing="$(comm -23 <(passes "$innodb") <(passes "$subito") | comm -23 - <(echo "$disabled"))"
known="$(comm -12 <(passes "$innodb") <(echo "$disabled"))"
extra="$(comm -13 <(passes "$innodb") <(passes "$subito"))"
echo "storage_engine: Subito passes $(passes "$subito" | wc -l), InnoDB passes $(passes "$innodb" | wc -l)" \
  "of $(echo "$subito" | wc -l) tests"
[ -z "$known" ] || echo "known differences (InnoDB passes, disabled for Subito): $(echo $known)"
[ -z "$extra" ] || echo "Subito passes, InnoDB does not: $(echo $extra)"
if [ -n "$missing" ]; then
  echo "FAILED: InnoDB passes, Subito does not: $(echo $missing)"
  exit 1
fi
echo "storage_engine: Subito passes every test InnoDB passes"
