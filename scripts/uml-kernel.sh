#!/usr/bin/env bash
# Builds cctest's User-Mode Linux kernel (ARCH=um, time travel) from Debian's linux-source-<series>
# with the patches scripts/uml/patches/<series>/*.patch and the config fragment
# scripts/uml/cctest.config, and caches the binary plus the tree that out-of-tree modules build
# against under
#   ${CCTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cctest}/uml/<source version>-<inputs hash>/
# where the inputs hash covers the fragment, the build identity (scripts/uml/build-identity.env) and
# the series' patches (any edit of one builds anew).
# (cctest/emulation/umlkernel.py finds it by the same rule). A no-op when that directory is complete.
# Debian's own user-mode-linux package cannot serve: it has no time travel.
#
# The series is $CCTEST_UML_SERIES: 6.1 (the default; linux-source-6.1 from the host's own apt
# sources, Debian 12) or 7.2 (linux-source-7.2 from Debian's trixie-backports, installed through a
# sources list of its own that apt reads for this install only; it has the seccomp userspace mode).
#
#   scripts/uml-kernel.sh            build (installs linux-source-<series> when missing; root for that)
#   scripts/uml-kernel.sh --print    print the cache directory this checkout wants, build nothing
#   scripts/uml-kernel.sh --prune    remove every other cached build (another checkout's or an older
#                                    fragment's: 1.5 GB each), keep this checkout's build of each
#                                    series whose source is installed
#   scripts/uml-kernel.sh --export DIR
#                                    copy this checkout's build of the selected series (built
#                                    already) into DIR/<its name>/, of its tree only what an
#                                    out-of-tree module build reads (78 MB of 1.5 GB on 6.1),
#                                    readable by all: the image's kernel (Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."

fragment=scripts/uml/cctest.config
identity=scripts/uml/build-identity.env
known_series="6.1 7.2"
# A series' source package, where it comes from ("host": the host's own apt sources; otherwise a
# suite of the Debian mirror, $CCTEST_DEBIAN_MIRROR or deb.debian.org) and its patches.
use_series() {
  case "$1" in
    6.1) suite=host ;;
    7.2) suite=trixie-backports ;;
    *) echo "scripts/uml-kernel.sh: CCTEST_UML_SERIES=$1: known series are ${known_series// / and }" >&2; exit 2 ;;
  esac
  series=$1
  package=linux-source-$series
  # C collation: the same order as cctest/emulation/umlkernel.py's sorted(), which hashes the same bytes
  patches=$(LC_ALL=C ls scripts/uml/patches/"$series"/*.patch 2>/dev/null || true)
}
selected=${CCTEST_UML_SERIES:-6.1}
use_series "$selected"
jobs=${CCTEST_UML_JOBS:-$(nproc)}

source_version() { dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true; }
# shellcheck disable=SC2086  # one word per patch file
inputs_sha256() { cat "$fragment" "$identity" $patches | sha256sum | cut -d' ' -f1; }
fragment_hash() { inputs_sha256 | cut -c1-12; }
cache_root="${CCTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cctest}/uml"

wanted() {
  version=$(source_version)
  [ -n "$version" ] || { echo "scripts/uml-kernel.sh: $package is not installed" >&2; exit 2; }
  echo "$cache_root/$version-$(fragment_hash)"
}

# The builds beside the given ones (one a line), left-over partial builds (.build-*) included.
others() {
  local keep=$1
  [ -d "$cache_root" ] || return 0
  find "$cache_root" -mindepth 1 -maxdepth 1 -type d -print | grep -vxF -- "$keep" || true
}

# This checkout's build of every series whose source is installed (the selected one at least).
kept_builds() {
  local s
  for s in $known_series; do
    use_series "$s"
    if [ "$s" = "$selected" ] || [ -n "$(source_version)" ]; then wanted; fi
  done
  use_series "$selected"
}

# What `make ARCH=um -C tree M=<dir> modules` reads of the tree: the top Makefile, .config,
# Module.symvers, include/, scripts/ (built), and of arch/ its Kconfig, um/ and x86/. The project's
# modules built against this part are byte-identical to those built against the whole tree.
export_build() {
  local src=$1 out
  out="$2/$(basename "$src")"
  if ! { [ -x "$src/linux" ] && [ -f "$src/tree/Module.symvers" ]; }; then
    echo "scripts/uml-kernel.sh: no complete build in $src (run scripts/uml-kernel.sh first)" >&2
    exit 2
  fi
  rm -rf "$out"
  mkdir -p "$out/tree/arch"
  cp -a "$src/linux" "$src/build.env" "$out/"
  (cd "$src/tree" && cp -a Makefile .config Module.symvers include scripts "$out/tree/" &&
    cp -a arch/Kconfig arch/um arch/x86 "$out/tree/arch/")
  # The build directory is its builder's alone (mktemp): readable by whoever the container runs as.
  chmod -R a+rX,go-w "$out"
  # The same times as the build's, so that an image layer made from the copy is the same every time.
  touch -r "$src/tree/arch" "$out/tree/arch"
  touch -r "$src/tree" "$out/tree"
  touch -r "$src" "$out"
  echo "$out"
}

case "${1:-}" in
  --print) wanted; exit 0 ;;
  --export)
    [ -n "${2:-}" ] || { echo "usage: scripts/uml-kernel.sh --export DIR" >&2; exit 2; }
    export_build "$(wanted)" "$2"
    exit 0 ;;
  --prune)
    keep=$(kept_builds)
    freed=0
    while IFS= read -r dir; do
      [ -n "$dir" ] || continue
      freed=$((freed + $(du -sk "$dir" | cut -f1)))
      rm -rf "$dir"
      echo "removed $dir"
    done < <(others "$keep")
    while IFS= read -r dir; do echo "kept $dir"; done <<< "$keep"
    echo "freed $((freed / 1024)) MB"
    exit 0 ;;
  "") ;;
  *) echo "usage: scripts/uml-kernel.sh [--print|--prune|--export DIR]" >&2; exit 2 ;;
esac

if [ -z "$(source_version)" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/uml-kernel.sh: $package is not installed (run as root, or apt-get install $package)" >&2
    exit 2
  fi
  if [ "$suite" = host ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "$package" flex bison bc xz-utils make gcc libc6-dev >/dev/null
  else
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      flex bison bc xz-utils make gcc libc6-dev >/dev/null
    # The suite's index goes into a directory of its own, which apt reads for this one install:
    # the host's sources, lists and package cache stay as they were.
    apt_dir=$(mktemp -d)
    chmod 755 "$apt_dir"  # apt fetches as its own user, _apt
    mkdir -p "$apt_dir/lists/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${CCTEST_DEBIAN_MIRROR:-http://deb.debian.org/debian} $suite main" \
      > "$apt_dir/sources.list"
    apt_opts=(-o Dir::Etc::sourcelist="$apt_dir/sources.list" -o Dir::Etc::sourceparts=-
              -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
              -o APT::Get::List-Cleanup=0)
    apt-get "${apt_opts[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "$package" >/dev/null
    rm -rf "$apt_dir"
  fi
fi
version=$(source_version)
dest="$cache_root/$version-$(fragment_hash)"
if [ -x "$dest/linux" ] && [ -f "$dest/tree/Module.symvers" ]; then
  echo "UML kernel cached: $dest"
  exit 0
fi

tarball=$(ls "/usr/src/$package.tar.xz")
mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "UML kernel: building $package $version with $fragment and ${patches:-no patches} in $work (about 10 min on 2 cores)"
tar -xJf "$tarball" -C "$work"
tree="$work/tree"
mv "$work/$package" "$tree"
for p in $patches; do
  patch -s -p1 -d "$tree" < "$p"
done

make -s -C "$tree" ARCH=um defconfig
# Later assignments override earlier ones in kconfig: the fragment wins over defconfig.
cat "$fragment" >> "$tree/.config"
make -s -C "$tree" ARCH=um olddefconfig

# Every option the fragment asks for must have survived olddefconfig (a missing dependency
# silently drops it otherwise); "=n" is satisfied by an absent option too.
bad=0
while IFS='=' read -r opt want; do
  got=$(grep -E "^$opt=" "$tree/.config" | cut -d= -f2- || true)
  if [ "$want" = n ]; then
    [ -z "$got" ] || { echo "  $opt: wanted n, got $got" >&2; bad=1; }
  elif [ "$got" != "$want" ]; then
    echo "  $opt: wanted $want, got ${got:-unset}" >&2; bad=1
  fi
done < <(grep -E '^CONFIG_[A-Z0-9_]+=' "$fragment")
if [ $bad != 0 ]; then
  echo "scripts/uml-kernel.sh: $fragment does not apply to $package $version (above)" >&2
  exit 1
fi

# The kernel's text about its build comes from the identity file, not from this host and hour.
set -a
# shellcheck source=uml/build-identity.env
. "$identity"
set +a
nice -n 10 make -s -C "$tree" ARCH=um -j"$jobs" all
test -f "$tree/Module.symvers"
cp "$tree/linux" "$work/linux"
strip "$work/linux"
# Keep what `make ARCH=um -C tree M=dir modules` needs (headers, .config, Module.symvers, the
# built scripts), not the 1 GB of objects.
find "$tree" -name '*.o' -not -path "$tree/scripts/*" -delete
rm -f "$tree/vmlinux" "$tree/linux" "$tree"/vmlinux.* "$tree"/*.tar*
{
  echo "series=$series"
  echo "version=$version"
  echo "inputs_sha256=$(inputs_sha256)"
  echo "release=$(make -s -C "$tree" ARCH=um kernelrelease)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$work/build.env"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "UML kernel built: $dest"
stale=$(others "$(kept_builds)")
[ -z "$stale" ] || printf "other cached UML builds (scripts/uml-kernel.sh --prune removes them):\n%s\n" "$stale"
