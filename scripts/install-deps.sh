#!/usr/bin/env bash
# Installs the Debian packages Subito builds, tests and benchmarks with, and
# the packages named as arguments (e.g. sysbench, once setup-mariadb.sh has
# pinned the server its client libraries must match).
# Idempotent: does nothing when everything is present.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config
  libpmem-dev      # PMDK's libpmem: mapping, flush, fence, non-temporal copies
  libnuma-dev      # NUMA node of the log, pinning of log threads
  libisal-dev      # Intel ISA-L: CRC32C
  libgtest-dev     # GoogleTest
  clang-format clang-tidy
  python3 python3-matplotlib   # benchmark plots
  python3-pymysql              # the differential SQL test's client
  "$@"
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-upgrade: never upgrade anything already installed (a MariaDB server
# pinned for the plugin must stay at its version).
$SUDO apt-get install -y -qq --no-upgrade "${missing[@]}" >/dev/null
