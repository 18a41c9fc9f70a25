# Shared by the plugin's test scripts (sourced): counters and how a check
# or a whole sub-suite is counted.
passed=0
failed=0
outcome() {  # label, then the command that decides
  local label=$1
  shift
  if "$@"; then echo "$label: ok"; passed=$((passed + 1)); else echo "$label: FAILED"; failed=$((failed + 1)); fi
}
# Runs a script that ends with "<name> tests: N passed, M failed" and adds
# its counts (a script that prints no such line counts as one failure).
sub_suite() {  # name, script, its arguments...
  local name=$1 log p f
  shift
  log="$(mktemp)"
  bash "$@" 2>&1 | tee "$log" || true
  p="$(sed -nE "s/^$name tests: ([0-9]+) passed.*/\\1/p" "$log")"
  f="$(sed -nE "s/^$name tests: [0-9]+ passed, ([0-9]+) failed.*/\\1/p" "$log")"
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-1}))
  rm -f "$log"
}
