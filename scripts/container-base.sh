#!/usr/bin/env bash
# Makes the Dockerfile's base image, debian:bookworm-slim, without a container registry: a minimal
# Debian rootfs from the Debian mirror this machine's apt already uses (debootstrap), imported into
# the container engine. Skipped when the engine already has the image (pulled or made earlier).
# Root only (debootstrap). Engine: $CCTEST_CONTAINER_ENGINE, else podman, else a running docker.
set -euo pipefail

# Fully qualified, as the Dockerfile names it: podman resolves no short names without a search registry.
IMAGE=docker.io/library/debian:bookworm-slim
SUITE=bookworm

engine=${CCTEST_CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
  else
    echo "container-base.sh: no podman and no running docker: base image skipped"
    exit 0
  fi
fi

if "$engine" image inspect "$IMAGE" >/dev/null 2>&1; then
  # grep exits 1 for "not there"; anything else (the engine could not run it) keeps the image.
  # Our own resource limits: an engine that raises them fails where it may not (docs/docker.md).
  rc=0
  "$engine" run --rm --network none --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
    --entrypoint grep "$IMAGE" -rqs "$SUITE-security" /etc/apt/sources.list /etc/apt/sources.list.d || rc=$?
  if [ "$rc" != 1 ]; then
    echo "container-base.sh: $engine already has $IMAGE"
    exit 0
  fi
  echo "container-base.sh: $engine's $IMAGE has no $SUITE-security source: making it anew"
fi

if [ "$(id -u)" != 0 ]; then
  echo "container-base.sh: run as root (debootstrap), or pull $IMAGE from a registry instead" >&2
  exit 2
fi

# The first mirror apt is configured with for a suite (e.g. $SUITE itself, not -updates or -security),
# from deb822 .sources files or one-line .list files.
mirror_for() {
  local suite=$1 found
  found=$(
  {
    for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && { cat "$f"; echo; }; done
  } | awk -v suite="$suite" '
    BEGIN { RS = ""; FS = "\n" }
    {
      uris = ""; ok = 0; enabled = 1
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
        if ($i ~ /^Suites:/) { n = split(substr($i, 8), s, /[ \t]+/); for (j = 1; j <= n; j++) if (s[j] == suite) ok = 1 }
        if ($i ~ /^Enabled:[ \t]*no/) enabled = 0
      }
      if (ok && enabled && uris != "") { split(uris, u, /[ \t]+/); print u[1]; exit }
    }'
  )
  if [ -z "$found" ]; then
    found=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -e 's/#.*//' -e 's/\[[^]]*\]//' | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }')
  fi
  echo "$found"
}
mirror=$(mirror_for "$SUITE")
# Debian's security archive is a mirror of its own; deb.debian.org serves it where apt names none.
security=$(mirror_for "$SUITE-security")
security=${security:-http://deb.debian.org/debian-security}
if [ -z "$mirror" ]; then
  echo "container-base.sh: no Debian $SUITE mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/" >&2
  exit 2
fi

rootfs=$(mktemp -d /var/tmp/cctest-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "container-base.sh: debootstrap $SUITE from $mirror"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >/dev/null

# Debian's own image's sources (deb822), in place of debootstrap's one-line sources.list.
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# Slim like Debian's own -slim images: later apt installs leave out docs, man pages and
# translations, and the apt caches are emptied.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/*.log

tar --numeric-owner -C "$rootfs" -c . | "$engine" import --change 'CMD ["bash"]' - "$IMAGE" >/dev/null
echo "container-base.sh: imported $IMAGE into $engine"
