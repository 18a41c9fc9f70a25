#!/usr/bin/env bash
# Builds go-tpc v1.0.9 (the TPC-C client) from the wrapper module in
# bench/go-tpc; prints the binary's path. Idempotent: rebuilds only when
# go.mod or go.sum changed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT_DIR="${SUBITO_TOOLS_DIR:-/var/tmp/subito-tools}"
OUT="$OUT_DIR/go-tpc"
mkdir -p "$OUT_DIR"
stamp="$(cat "$ROOT/bench/go-tpc/go.mod" "$ROOT/bench/go-tpc/go.sum" | sha256sum | cut -c1-16)"
if [ -x "$OUT" ] && [ "$(cat "$OUT.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "build-go-tpc: Go is not installed" >&2; exit 1; }
echo "build-go-tpc: building go-tpc v1.0.9 (about a minute)" >&2
(cd "$ROOT/bench/go-tpc" &&
  GONOSUMDB=github.com/pingcap/go-tpc GOFLAGS=-mod=readonly \
    go build -o "$OUT" github.com/pingcap/go-tpc/cmd/go-tpc) >&2
echo "$stamp" >"$OUT.stamp"
echo "$OUT"
