#!/usr/bin/env bash
# Runs a benchmark of bench/NAME.py against Debian's MariaDB server with
# Subito (installed and built first), teeing its output to out/NAME.txt.
# With --record among the arguments, its JSON and PNG (NAME.json and
# NAME.png in its --out directory, out/ by default) also go into docs/results.md and docs/img/NAME.png.
#
#   scripts/run-server-bench.sh NAME [--record] [arguments of bench/NAME.py]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
name=$1
shift
record=0
out=out  # the benchmark's --out, where its JSON and PNG go
args=()
prev=
for a in "$@"; do
  if [ "$a" = "--record" ]; then record=1; else args+=("$a"); fi
  if [ "$prev" = "--out" ]; then out=$a; fi
  case "$a" in --out=*) out=${a#--out=} ;; esac
  prev=$a
done
bash scripts/install-deps.sh
bash scripts/setup-mariadb.sh
bash scripts/install-deps.sh sysbench
mkdir -p out
/usr/bin/python3 "bench/$name.py" "${args[@]}" | tee "out/$name.txt"
if [ "$record" -eq 1 ]; then
  /usr/bin/python3 bench/render_results.py "$name" "$out/$name.json" "img/$name.png"
  mkdir -p docs/img
  cp "$out/$name.png" "docs/img/$name.png"
  echo "recorded in docs/results.md and docs/img/$name.png"
fi
