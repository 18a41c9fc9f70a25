#!/usr/bin/env bash
# Installs Debian's MariaDB server at the exact version the plugin is built
# for, holds it there, fetches that version's source, configures it with the
# flags of Debian's debian/rules, and builds only the Subito plugin
# (ha_subito.so), which it installs into the server's plugin directory.
#
# Idempotent: a second run with nothing changed only checks and relinks.
# Environment: SUBITO_MARIADB_WORK (default /var/tmp/subito-mariadb) holds the
# source tree and the plugin build.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="1:10.11.18-0+deb12u1"
UPSTREAM="10.11.18"
SERVER_VERSION="10.11.18-MariaDB-0+deb12u1"
PACKAGES=(mariadb-server mariadb-server-core mariadb-client mariadb-client-core
          mariadb-common mariadb-test mariadb-test-data libmariadb3)
# What configure needs to see the same system the Debian build saw (the
# Build-Depends of debian/control that change the server's configuration).
BUILD_DEPS=(bison dpkg-dev lsb-release libaio-dev libboost-dev libbz2-dev libcrack2-dev
            libcurl4-openssl-dev libedit-dev libfmt-dev libjemalloc-dev libjudy-dev
            libkrb5-dev liblz4-dev liblzma-dev liblzo2-dev libncurses-dev libnuma-dev
            libpam0g-dev libpcre2-dev libpmem-dev libsnappy-dev libssl-dev libsystemd-dev
            liburing-dev libxml2-dev libzstd-dev psmisc unixodbc-dev uuid-dev zlib1g-dev)
WORK="${SUBITO_MARIADB_WORK:-/var/tmp/subito-mariadb}"
SRC="$WORK/src"
BUILD="$WORK/build"
PLUGIN_DIR=/usr/lib/mysql/plugin

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
say() { echo "setup-mariadb: $*"; }
die() { echo "setup-mariadb: error: $*" >&2; exit 1; }

# dpkg-query fails for a package it has never seen: that is "not installed",
# not an error (set -o pipefail would otherwise end the script silently).
installed_version() {
  { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null || true; } | sed -En "s/^(install|hold) ok installed //p"
}

# 0. What Subito's own core library builds with (ISA-L, libpmem, ...).
bash "$ROOT/scripts/install-deps.sh"

# 1. The server packages, pinned and held.
need=()
for p in "${PACKAGES[@]}"; do
  v="$(installed_version "$p")"
  if [ -z "$v" ]; then
    need+=("$p=$VERSION")
  elif [ "$v" != "$VERSION" ]; then
    case "$p" in
      # Client packages that sysbench and other clients pull in at the
      # archive's newest point release: replaced by the pinned version
      # (same ABI within 10.11), which the server packages require.
      mariadb-common|libmariadb3)
        say "$p is installed at $v; replacing it with $VERSION, which the pinned server needs"
        need+=("$p=$VERSION") ;;
      *) die "$p is installed at $v; Subito is built for $VERSION (remove it or install that version)" ;;
    esac
  fi
done
updated=0
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  $SUDO apt-get update -qq; updated=1
  # policy-rc.d keeps Debian's own service from starting: the private server
  # is started by scripts/server-start.sh.
  $SUDO apt-get install -y -qq --no-upgrade --allow-downgrades "${need[@]}" >/dev/null
fi
$SUDO apt-mark hold "${PACKAGES[@]}" >/dev/null

missing=()
for p in "${BUILD_DEPS[@]}"; do
  [ -n "$(installed_version "$p")" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing build dependencies: ${missing[*]}"
  [ $updated -eq 1 ] || { $SUDO apt-get update -qq; updated=1; }
  $SUDO apt-get install -y -qq --no-upgrade "${missing[@]}" >/dev/null
fi
for p in "${PACKAGES[@]}"; do
  [ "$(installed_version "$p")" = "$VERSION" ] || die "$p is not at $VERSION after installing"
done

got="$(/usr/sbin/mariadbd --version | awk '{print $3}')"
[ "$got" = "$SERVER_VERSION" ] || die "/usr/sbin/mariadbd is $got, expected $SERVER_VERSION"

# 2. The source of exactly that version (deb-src for bookworm main only).
mkdir -p "$WORK"
if [ ! -f "$SRC/.subito-extracted" ]; then
  list=/etc/apt/sources.list.d/subito-mariadb-src.sources
  if [ ! -f "$list" ]; then
    $SUDO tee "$list" >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    $SUDO apt-get update -qq
  fi
  say "fetching the source of mariadb $VERSION"
  (cd "$WORK" && apt-get source --download-only -qq "mariadb=$VERSION" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  dsc="$WORK/mariadb_${VERSION#1:}.dsc"
  [ -f "$dsc" ] || die "apt-get source did not fetch $dsc"
  rm -rf "$SRC"
  # apt checked the files against the signed Release file; dpkg-source only
  # lacks the uploader's key.
  dpkg-source -x "$dsc" "$SRC" >/dev/null 2>"$WORK/dpkg-source.log"
  touch "$SRC/.subito-extracted"
fi

# 3. The plugin joins the source tree as storage/subito.
link="$SRC/storage/subito"
if [ "$(readlink "$link" 2>/dev/null)" != "$ROOT/mariadb" ]; then
  rm -f "$link"
  ln -s "$ROOT/mariadb" "$link"
  rm -f "$BUILD/.subito-configured"  # a new checkout: configure again
fi

# 4. Configure with Debian's flags: dpkg-buildflags (hardening=+all, CPPFLAGS
# folded into C(XX)FLAGS as debian/rules does), dh_auto_configure's
# arguments, then override_dh_auto_configure's.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
eval "$(dpkg-buildflags --export=sh)"
export CFLAGS="$CFLAGS $CPPFLAGS" CXXFLAGS="$CXXFLAGS $CPPFLAGS"
DEB_HOST_ARCH="$(dpkg-architecture -qDEB_HOST_ARCH)"
DEB_HOST_MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
DEB_HOST_GNU_SYSTEM="$(dpkg-architecture -qDEB_HOST_GNU_SYSTEM)"
REVISION="${VERSION##*-}"
CONFIG=(
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_LOCALSTATEDIR=/var
  -DCMAKE_EXPORT_NO_PACKAGE_REGISTRY=ON -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DFETCHCONTENT_FULLY_DISCONNECTED=ON
  -DCMAKE_INSTALL_RUNSTATEDIR=/run -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON
  -DCMAKE_INSTALL_LIBDIR="lib/$DEB_HOST_MULTIARCH"
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DWITH_PMEM=ON
  -DCOMPILATION_COMMENT="Debian $(lsb_release -r -s)"
  -DMYSQL_SERVER_SUFFIX="-$REVISION"
  -DSYSTEM_TYPE="debian-$DEB_HOST_GNU_SYSTEM"
  -DCMAKE_SYSTEM_PROCESSOR="$DEB_HOST_ARCH"
  -DBUILD_CONFIG=mysql_release
  -DCONC_DEFAULT_CHARSET=utf8mb4
  -DPLUGIN_AWS_KEY_MANAGEMENT=NO
  -DPLUGIN_COLUMNSTORE=NO
  -DWITH_NUMA=AUTO
  -DIGNORE_AIO_CHECK=ON
  -DWITH_URING=ON
  -DWITH_LIBAIO=ON
  -DWITH_INNODB_SNAPPY=ON
  -DDEB=Debian
  -DSUBITO_ROOT="$ROOT"
)
fingerprint="$(printf '%s\n' "$CFLAGS" "$CXXFLAGS" "$LDFLAGS" "${CONFIG[@]}" | sha256sum | cut -c1-16)"
if [ "$(cat "$BUILD/.subito-configured" 2>/dev/null)" != "$fingerprint" ]; then
  say "configuring mariadb $UPSTREAM with Debian's flags (about a minute)"
  # The plugin's objects go too: built from another checkout (SUBITO_ROOT
  # is in the fingerprint), they can be newer than this one's sources and
  # would be linked in stale (a crash at load, from mismatched layouts).
  rm -rf "$BUILD/storage/subito"
  mkdir -p "$BUILD"
  (cd "$BUILD" && cmake "$SRC" -G "Unix Makefiles" "${CONFIG[@]}" >"$BUILD/configure.log" 2>&1) ||
    { tail -30 "$BUILD/configure.log"; die "configure failed (log: $BUILD/configure.log)"; }
  echo "$fingerprint" >"$BUILD/.subito-configured"
fi

# 5. Build only the plugin (it builds Subito's core library with it).
say "building ha_subito.so"
(cd "$BUILD" && make -j"$(nproc)" subito >"$BUILD/build.log" 2>&1) ||
  { grep -E 'error|Error' "$BUILD/build.log" | head -30; die "plugin build failed (log: $BUILD/build.log)"; }
so="$BUILD/storage/subito/ha_subito.so"
[ -f "$so" ] || die "the build produced no $so"

# 6. Every symbol the plugin takes from the server must be one mariadbd
# exports (a wrong header or flag shows up here, not as a crash later).
undefined="$(nm -D --undefined-only "$so" | awk '$1 == "U" {print $2}' | sed 's/@.*//' | sort -u)"
exported="$(nm -D --defined-only /usr/sbin/mariadbd | awk '{print $3}' | sort -u)"
libs="$(for l in $(ldd "$so" | awk '/=>/ {print $3} $1 ~ /^\// {print $1}'); do nm -D --defined-only "$l" 2>/dev/null | awk '{print $3}'; done | sed 's/@.*//' | sort -u)"
unresolved="$(comm -23 <(echo "$undefined") <(sort -u <(echo "$exported") <(echo "$libs")))"
if [ -n "$unresolved" ]; then
  echo "$unresolved" | head -20 >&2
  die "ha_subito.so needs symbols that /usr/sbin/mariadbd does not export (above)"
fi

$SUDO install -m 0644 "$so" "$PLUGIN_DIR/ha_subito.so"
say "ok: $PLUGIN_DIR/ha_subito.so for mariadbd $SERVER_VERSION"
