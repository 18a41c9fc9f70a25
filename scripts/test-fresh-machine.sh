#!/usr/bin/env bash
# Proves the README's two commands on a fresh Debian 12 machine: builds a
# clean bookworm root with debootstrap, gives it what a machine has, puts a
# fresh clone of this repository's committed HEAD in /root/subito (and
# ../shared beside it, as /root/shared), then runs, as root inside it,
#   bash scripts/main.sh     and then     bash scripts/test.sh
# each timed, each logged to a file outside the root, and prints a summary:
# debootstrap time, main.sh time and exit code, test.sh time, exit code and
# its final "tests: N passed, M failed" line. Exits 0 only if both passed.
#
#   scripts/test-fresh-machine.sh [options]
#     --dir D          the root to build (default /var/tmp/subito-fresh); must
#                      be absent or empty unless --reuse
#     --reuse          accept a non-empty D: a complete root there is used as
#                      it is (no debootstrap; for re-running after a fix), the
#                      repository copy is always made afresh
#     --keep           keep D even when both commands passed
#     --remove         remove D even when something failed
#                      (default: removed if both passed, kept for inspection
#                      if not; always unmounted first)
#     --logs L         log directory (default /var/tmp/subito-fresh-logs.<time>):
#                      debootstrap.log, main.log, test.log, summary.txt
#     --repo R         the repository to clone (default: the one holding this
#                      script); its HEAD commit is cloned, not its work tree
#     --shared S       copied to /root/shared (default: R/../shared)
#     --mirror URL     Debian mirror (default http://deb.debian.org/debian)
#     --security URL   security mirror (default http://deb.debian.org/debian-security)
#     --variant V      debootstrap variant (default: debootstrap's own, i.e.
#                      priority required + important, as a minimal installed
#                      machine; "minbase" is stricter)
#     --shm-size S     size of the root's private /dev/shm tmpfs (default 12G)
#     --test-net N     "private" (default) or "host": the network of test.sh
#     --main-only      run main.sh only
#
# The machine: debootstrap's bookworm base plus git (the README's premise is
# "from a clone of this repository", so git is there; test.sh runs git
# ls-files). Its apt sources are what the Debian installer writes: bookworm,
# bookworm-security and bookworm-updates, main. It gets /proc, /sys, /dev
# and /dev/pts (binds made private), a private tmpfs on /dev/shm (not the
# host's), resolv.conf/hostname/hosts, and a policy-rc.d that refuses every
# service start, so Debian's own mariadb service stays stopped (the
# project's scripts start private servers). Mounts are undone on exit by a
# trap, on failure too, before anything is removed.
#
# Namespaces: every command in the root runs in its own PID namespace (with
# its own /proc, in its own mount namespace), so nothing it starts outlives
# it: when it ends, or this script is killed, every process in it is
# killed.
# Network: main.sh installs packages with apt, so it runs on the host's
# network (it leaves a private server on 127.0.0.1:3391, which this script
# checks is free beforehand, and which it stops once main.sh is done, after
# checking it still answers, as the README says it does). test.sh then runs
# in a network namespace of its own (only a loopback, brought up), so its
# servers (ports 3392-3394) and mtr's port range cannot collide with
# servers on the host. That works because main.sh has installed everything
# test.sh needs (the same install-deps.sh and setup-mariadb.sh, which do
# nothing when all is present), and nothing test.sh runs downloads anything
# else (no Go modules, pip or FetchContent: go-tpc is only used by
# test-tpcc.sh, which test.sh does not run). --test-net host if needed.
#
# Run as root. On a busy machine: nice -n 19 ionice -c3 bash scripts/test-fresh-machine.sh

# SC2016: the commands for the root are single-quoted on purpose (expanded
# there); SC2317: cleanup and its helpers run from a trap.
# shellcheck disable=SC2016,SC2317
set -Eeuo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR=/var/tmp/subito-fresh
REUSE=0
KEEP=auto
LOGS=""
REPO="$ROOT"
SHARED=""
MIRROR=http://deb.debian.org/debian
SECURITY=http://deb.debian.org/debian-security
VARIANT=""
SHM_SIZE=12G
TEST_NET=private
MAIN_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --reuse) REUSE=1; shift ;;
    --keep) KEEP=always; shift ;;
    --remove) KEEP=never; shift ;;
    --logs) LOGS="$2"; shift 2 ;;
    --repo) REPO="$2"; shift 2 ;;
    --shared) SHARED="$2"; shift 2 ;;
    --mirror) MIRROR="$2"; shift 2 ;;
    --security) SECURITY="$2"; shift 2 ;;
    --variant) VARIANT="$2"; shift 2 ;;
    --shm-size) SHM_SIZE="$2"; shift 2 ;;
    --test-net) TEST_NET="$2"; shift 2 ;;
    --main-only) MAIN_ONLY=1; shift ;;
    -h | --help) sed -n '2,/^# Run as root/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-fresh-machine: unknown option $1" >&2; exit 2 ;;
  esac
done

step() { printf '\n=== %s\n' "$*"; }
say() { echo "test-fresh-machine: $*"; }
die() { echo "test-fresh-machine: error: $*" >&2; exit 1; }
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mounts, chroot)"
case "$TEST_NET" in private | host) ;; *) die "--test-net is private or host" ;; esac
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd -P)"
case "$DIR" in
  /*/*) ;;
  *) die "--dir must be a directory below a top-level directory (got $DIR)" ;;
esac
[[ "$DIR" != *[[:space:]]* ]] || die "--dir must not contain white space"
REPO="$(cd "$REPO" && pwd -P)"
[ -n "$SHARED" ] || SHARED="$REPO/../shared"
[ -d "$SHARED" ] || die "no $SHARED (it must sit beside the repository)"
SHARED="$(cd "$SHARED" && pwd -P)"
[ -n "$LOGS" ] || LOGS="/var/tmp/subito-fresh-logs.$(date +%Y%m%d-%H%M%S)"
mkdir -p "$LOGS"
LOGS="$(cd "$LOGS" && pwd -P)"
case "$LOGS/" in "$DIR"/*) die "--logs must be outside the root $DIR" ;; esac

# Mount points below DIR, from the kernel's table (findmnt escapes blanks,
# and DIR has none).
mounts_below() { findmnt -rn -o TARGET | awk -v d="$DIR" '$0 == d || index($0, d "/") == 1'; }
[ -z "$(mounts_below)" ] || die "something is mounted below $DIR (an earlier run?); unmount it first:
$(mounts_below)"
if [ -n "$(ls -A "$DIR")" ] && [ "$REUSE" -eq 0 ]; then
  die "$DIR is not empty (use --reuse to use it, or another --dir)"
fi

MOUNTED=()    # mount points made by this script, in order
RUNNER=""     # pid of the unshare running a command in the root
RESULT=fail   # "pass" once both commands passed
# Pids of processes whose root directory is DIR (all started by this script).
procs_in_root() {
  local p r
  for p in /proc/[0-9]*; do
    r="$(readlink "$p/root" 2>/dev/null)" || continue
    if [ "$r" = "$DIR" ] || [[ "$r" == "$DIR"/* ]]; then echo "${p#/proc/}"; fi
  done
}
cleanup() {
  local rc=$? m i pids
  trap - EXIT INT TERM
  set +e
  if [ -n "$RUNNER" ] && kill -0 "$RUNNER" 2>/dev/null; then
    say "stopping the command still running in the root (unshare pid $RUNNER)"
    kill -KILL "$RUNNER"  # --kill-child: its PID namespace goes with it
    wait "$RUNNER" 2>/dev/null
  fi
  for i in $(seq 1 60); do
    pids="$(procs_in_root)"
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086  # one pid per word
    [ "$i" -lt 60 ] || { say "killing what is left in the root:" $pids; kill -KILL $pids; sleep 1; }
    sleep 0.5
  done
  if [ ${#MOUNTED[@]} -gt 0 ]; then
    step "unmounting"
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
      m="${MOUNTED[$i]}"
      mountpoint -q "$m" || continue
      umount "$m" || { say "umount $m failed; detaching it (umount -l)"; umount -l "$m"; }
    done
  fi
  if [ -n "$(mounts_below)" ]; then
    say "still mounted below $DIR, so it is left alone:"
    mounts_below
    rc=1
  elif [ "$KEEP" = never ] || { [ "$KEEP" = auto ] && [ "$RESULT" = pass ]; }; then
    step "removing $DIR"
    # --one-file-system: never into a mount, should one have appeared.
    rm -rf --one-file-system "$DIR" && say "removed $DIR"
  else
    say "the root is kept for inspection: $DIR"
    say "  enter it: mount -t proc proc $DIR/proc; mount --bind /dev $DIR/dev; chroot $DIR bash"
    say "  (and umount $DIR/dev $DIR/proc afterwards, before removing it)"
  fi
  say "logs: $LOGS"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "test-fresh-machine: failed (line $LINENO): $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command (bash -c string) in the root, as root in /root/subito with
# a login-like environment and no stdin, in new PID and mount namespaces
# (and a new network namespace if $1 is "private"); appends its output to
# $2. Returns its exit code. Runs in the background and waits, so that a
# signal to this script reaches the trap at once.
in_root() {
  local net=$1 log=$2 cmd=$3 netopt=() rc=0
  [ "$net" = host ] || netopt=(--net)
  unshare "${netopt[@]}" --pid --fork --kill-child=KILL -- /bin/sh -c '
    if [ "$1" = private ]; then ip link set lo up || exit 125; fi
    exec unshare --mount-proc --root="$2" --wd=/root/subito env -i HOME=/root USER=root \
      LOGNAME=root SHELL=/bin/bash PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "$3"' sh "$net" "$DIR" "$cmd" </dev/null >>"$log" 2>&1 &
  RUNNER=$!
  wait "$RUNNER" || rc=$?
  RUNNER=""
  return "$rc"
}

say "root $DIR, logs $LOGS"
say "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), nice $(nice)"

step "1/5 a Debian 12 root (debootstrap bookworm from $MIRROR${VARIANT:+, variant $VARIANT})"
T_DEBOOTSTRAP=""
if [ -x "$DIR/usr/bin/apt-get" ] && [ -f "$DIR/etc/debian_version" ] && [ ! -d "$DIR/debootstrap" ]; then
  [ "$REUSE" -eq 1 ] || die "$DIR holds a root already"
  say "--reuse: using the root already in $DIR (Debian $(cat "$DIR/etc/debian_version")), no debootstrap"
else
  if ! command -v debootstrap >/dev/null; then
    say "installing Debian's debootstrap package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  fi
  t0=$SECONDS
  if ! debootstrap ${VARIANT:+--variant="$VARIANT"} --include=git bookworm "$DIR" "$MIRROR" \
       >"$LOGS/debootstrap.log" 2>&1; then
    tail -30 "$LOGS/debootstrap.log"
    die "debootstrap failed (log: $LOGS/debootstrap.log)"
  fi
  T_DEBOOTSTRAP=$((SECONDS - t0))
  say "debootstrap: $(fmt "$T_DEBOOTSTRAP"), $(du -sh --one-file-system "$DIR" | cut -f1)," \
      "$(chroot "$DIR" dpkg-query -W | wc -l) packages"
fi

step "2/5 what a machine has: apt sources, policy-rc.d, /etc, /proc, /sys, /dev, /dev/pts, /dev/shm"
cat >"$DIR/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $SECURITY bookworm-security main
deb $MIRROR bookworm-updates main
EOF
cat >"$DIR/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
# scripts/test-fresh-machine.sh: no service starts in this root.
exit 101
EOF
chmod 0755 "$DIR/usr/sbin/policy-rc.d"
rm -f "$DIR/etc/resolv.conf"
cp -L /etc/resolv.conf "$DIR/etc/resolv.conf"
hostname >"$DIR/etc/hostname"
if ! grep -qE '^127\.0\.0\.1[[:space:]].*\blocalhost\b' "$DIR/etc/hosts" 2>/dev/null; then
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname)" >"$DIR/etc/hosts"
fi
mnt() {  # mount point (below DIR), then mount's arguments
  local at="$DIR$1"
  shift
  mkdir -p "$at"
  mountpoint -q "$at" && die "$at is a mount point already"
  MOUNTED+=("$at")
  mount "$@" "$at"
  mount --make-private "$at"  # nothing mounted below it reaches the host
}
mnt /proc -t proc proc
mnt /sys -t sysfs sysfs
mnt /dev --bind /dev
mnt /dev/pts --bind /dev/pts
mnt /dev/shm -t tmpfs -o "size=$SHM_SIZE,mode=1777,nosuid,nodev" tmpfs
for m in "${MOUNTED[@]}"; do findmnt -n -o TARGET,FSTYPE,SIZE,PROPAGATION --mountpoint "$m"; done

step "3/5 a clone of $REPO (committed HEAD) in /root/subito, $SHARED in /root/shared"
REV="$(git -C "$REPO" rev-parse HEAD)"
SUBJECT="$(git -C "$REPO" log -1 --format=%s "$REV")"
[ ${#SUBJECT} -le 90 ] || SUBJECT="${SUBJECT:0:87}..."
dirty="$(git -C "$REPO" status --porcelain | wc -l)"
say "HEAD $REV: $SUBJECT"
[ "$dirty" -eq 0 ] || say "($dirty changed or new files in $REPO's work tree are not part of the test)"
rm -rf "$DIR/root/subito" "$DIR/root/shared"
git clone -q --no-hardlinks --no-checkout "$REPO" "$DIR/root/subito"
git -C "$DIR/root/subito" checkout -q -B main "$REV"
cp -a "$SHARED" "$DIR/root/shared"
say "$(git -C "$DIR/root/subito" ls-files | wc -l) files at $(git -C "$DIR/root/subito" rev-parse --short HEAD)," \
    "$(find "$DIR/root/shared" -type f | wc -l) in /root/shared"
# A look from inside, in the namespaces the tests get: PID 1 is the command
# itself, /proc is its own, only a loopback.
in_root private "$LOGS/probe.log" 'echo "inside: pid $$, $(ls /proc | grep -c "^[0-9]") processes," \
  "network: $(ip -br link 2>/dev/null | cut -d" " -f1 | tr "\n" " " || echo "(no ip)")," \
  "Debian $(cat /etc/debian_version), $(git --version), in $PWD"' ||
  { cat "$LOGS/probe.log"; die "cannot run a command in the root"; }
say "$(cat "$LOGS/probe.log")"

step "4/5 bash scripts/main.sh (host network; log $LOGS/main.log)"
if command -v ss >/dev/null && [ -n "$(ss -Hltn 'sport = :3391')" ]; then
  die "port 3391 (main.sh's server) is in use on the host: $(ss -Hltnp 'sport = :3391')"
fi
: >"$LOGS/main.log"
MAIN_RC=0
t0=$SECONDS
in_root host "$LOGS/main.log" '
  s=$SECONDS
  bash scripts/main.sh
  rc=$?
  echo "@@ main.sh exit $rc after $((SECONDS - s)) s"
  if command -v mariadb-admin >/dev/null &&
     mariadb-admin --no-defaults --socket=/var/tmp/subito-server/mysqld.sock -uroot ping; then
    echo "@@ the server main.sh left running answers; stopping it: bash scripts/server-stop.sh"
    bash scripts/server-stop.sh
  else
    echo "@@ no server from main.sh answers"
  fi
  exit $rc' || MAIN_RC=$?
T_MAIN="$(sed -nE 's/^@@ main\.sh exit [0-9]+ after ([0-9]+) s$/\1/p' "$LOGS/main.log")"
[ -n "$T_MAIN" ] || T_MAIN=$((SECONDS - t0))
MAIN_SERVER=no
if grep -q '^@@ the server main.sh left running answers' "$LOGS/main.log"; then MAIN_SERVER=yes; fi
tail -25 "$LOGS/main.log"
say "main.sh: exit $MAIN_RC after $(fmt "$T_MAIN"); its server kept running afterwards: $MAIN_SERVER"

TEST_RC=""
T_TEST=""
TESTS_LINE=""
if [ "$MAIN_ONLY" -eq 1 ]; then
  say "--main-only: test.sh not run"
elif [ "$MAIN_RC" -ne 0 ]; then
  say "main.sh failed: test.sh not run"
else
  step "5/5 bash scripts/test.sh ($TEST_NET network; log $LOGS/test.log)"
  : >"$LOGS/test.log"
  TEST_RC=0
  t0=$SECONDS
  in_root "$TEST_NET" "$LOGS/test.log" '
    s=$SECONDS
    bash scripts/test.sh
    rc=$?
    echo "@@ test.sh exit $rc after $((SECONDS - s)) s"
    exit $rc' || TEST_RC=$?
  T_TEST="$(sed -nE 's/^@@ test\.sh exit [0-9]+ after ([0-9]+) s$/\1/p' "$LOGS/test.log")"
  [ -n "$T_TEST" ] || T_TEST=$((SECONDS - t0))
  TESTS_LINE="$(grep -E '^tests: [0-9]+ passed, [0-9]+ failed' "$LOGS/test.log" | tail -1 || true)"
  # The outline: steps, ctest totals, style checks, each plugin test's verdict.
  grep -E '^(=== |[0-9]+% tests passed|clang-format:|clang-tidy |plugin tests:|storage_engine:|differential:|many tables:|sysbench |restart after|tests:)|: (ok|FAILED)$|^(ok|FAILED):|FAILED' \
    "$LOGS/test.log" || true
fi

step "summary"
{
  echo "repository:  $REPO at $REV ($SUBJECT)"
  echo "root:        $DIR (Debian $(cat "$DIR/etc/debian_version"), $(du -sh --one-file-system "$DIR" | cut -f1))"
  if [ -n "$T_DEBOOTSTRAP" ]; then
    echo "debootstrap: $(fmt "$T_DEBOOTSTRAP")"
  else
    echo "debootstrap: not run (--reuse of an existing root)"
  fi
  echo "main.sh:     exit $MAIN_RC, $(fmt "$T_MAIN") (server left running: $MAIN_SERVER)"
  if [ -n "$TEST_RC" ]; then
    echo "test.sh:     exit $TEST_RC, $(fmt "$T_TEST"), ${TESTS_LINE:-no final \"tests:\" line} ($TEST_NET network)"
  else
    echo "test.sh:     not run"
  fi
  echo "logs:        $LOGS"
} | tee "$LOGS/summary.txt"

if [ "$MAIN_RC" -eq 0 ] && { [ "$MAIN_ONLY" -eq 1 ] || [ "${TEST_RC:-1}" -eq 0 ]; }; then
  RESULT=pass
  say "PASSED"
  exit 0
fi
say "FAILED"
exit 1
