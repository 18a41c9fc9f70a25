#!/usr/bin/env bash
# Runs every test Subito has: style checks, then the unit, crash and
# corruption tests in a release build, under ASan+UBSan, and under TSan,
# then the MariaDB plugin's tests (scripts/test-mariadb.sh).
# Usage: scripts/test.sh            (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
failures=0
passed=0
failed=0

step() { printf '\n=== %s  (at %d min %02d s)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

step "clang-format"
if ! git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror; then
  echo "clang-format: files differ from .clang-format (run: git ls-files '*.cc' '*.h' | xargs clang-format -i)"
  failures=$((failures + 1))
fi

run_tree() {  # name, cmake flags...
  local name=$1
  shift
  step "build ($name)"
  cmake -S . -B "build-$name" -G Ninja "$@" >/dev/null
  ninja -C "build-$name" -j "$jobs"
  step "tests ($name)"
  local log="build-$name/ctest.log"
  if (cd "build-$name" && ctest -j "$jobs" --output-on-failure --timeout 900) >"$log" 2>&1; then
    tail -n 3 "$log"
  else
    cat "$log" | grep -vE '^ +Start|Passed' || true
    failures=$((failures + 1))
  fi
  local p f
  p=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log" || true)
  f=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|\*\*\*Not Run| Failed)' "$log" || true)
  passed=$((passed + p))
  failed=$((failed + f))
}

run_tree release -DCMAKE_BUILD_TYPE=RelWithDebInfo
step "clang-tidy"
if ! git ls-files 'src/*.cc' |
  xargs -P "$jobs" -n 8 clang-tidy -p build-release --quiet --warnings-as-errors='*' 2>/dev/null; then
  echo "clang-tidy found problems (see above)"
  failures=$((failures + 1))
fi
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_tree asan -DCMAKE_BUILD_TYPE=Debug -DSUBITO_SANITIZE=address,undefined
TSAN_OPTIONS="halt_on_error=1 detect_deadlocks=0 suppressions=$PWD/tsan.supp" run_tree tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSUBITO_SANITIZE=thread

step "MariaDB plugin (mtr suite, sysbench)"
plog="$(mktemp)"
if bash scripts/test-mariadb.sh 2>&1 | tee "$plog"; then :; else failures=$((failures + 1)); fi
grep -q '^plugin tests:' "$plog" || failures=$((failures + 1))
pp="$(sed -nE 's/^plugin tests: ([0-9]+) passed.*/\1/p' "$plog" | tail -1)"
pf="$(sed -nE 's/^plugin tests: [0-9]+ passed, ([0-9]+) failed.*/\1/p' "$plog" | tail -1)"
passed=$((passed + ${pp:-0}))
failed=$((failed + ${pf:-0}))
rm -f "$plog"

echo
echo "tests: $passed passed, $failed failed ($((SECONDS / 60)) min $((SECONDS % 60)) s)"
[ "$failures" -eq 0 ]
