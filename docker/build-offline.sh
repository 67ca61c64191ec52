#!/usr/bin/env bash
# Builds the agentmesh image where the Docker engine has no registry access
# (no `docker pull`), from a binary built on this host:
#
#   docker/build-offline.sh [--tag NAME] [BINARY]
#
# BINARY defaults to target/release/agentmesh if it exists, else
# target/debug/agentmesh (under $CARGO_TARGET_DIR when set). The image is
# tagged agentmesh:latest unless --tag says otherwise.
#
# 1. The base image agentmesh-base:bookworm ($AGENTMESH_BASE_IMAGE) is made
#    once, if missing: `debootstrap --variant=minbase` of Debian bookworm
#    (with ca-certificates and curl) from the mirror apt already uses here
#    ($DEBIAN_MIRROR overrides), imported with `docker import`. debootstrap
#    is installed with apt if missing. Later runs reuse the base.
# 2. `docker build -f docker/Dockerfile.offline` on a small context: the
#    binary (its debug info stripped) and docker/'s runtime files.
#
# The binary must run on bookworm's glibc (built on bookworm or older).
# Re-runnable; temporary files are removed on exit, even on failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tag=agentmesh:latest
base=${AGENTMESH_BASE_IMAGE:-agentmesh-base:bookworm}
suite=bookworm
bin=""

die() {
    echo "build-offline: $*" >&2
    exit 1
}
log() { echo "build-offline: $*" >&2; }

while [ $# -gt 0 ]; do
    case "$1" in
    --tag)
        [ $# -ge 2 ] || die "--tag needs a value"
        tag=$2
        shift 2
        ;;
    -h | --help)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option $1 (see --help)" ;;
    *)
        [ -z "$bin" ] || die "one binary only (got $bin and $1)"
        bin=$1
        shift
        ;;
    esac
done

if [ -z "$bin" ]; then
    target=${CARGO_TARGET_DIR:-$repo/target}
    if [ -x "$target/release/agentmesh" ]; then
        bin=$target/release/agentmesh
    else
        bin=$target/debug/agentmesh
    fi
fi
[ -f "$bin" ] && [ -x "$bin" ] || die "no agentmesh binary at $bin (cargo build --bin agentmesh first, or give its path)"
version=$("$bin" --version) || die "$bin does not run on this host"

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "no Docker daemon answers (docker info failed)"

# The Debian mirror apt uses here: the first bookworm suite in
# /etc/apt/sources.list.d/*.sources (deb822) or in one-line sources lists.
debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then
        echo "$DEBIAN_MIRROR"
        return
    fi
    local f uri=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk -v suite="$suite" '
            function flush() { if (!done && uris != "" && has) { split(uris, u, " "); print u[1]; done = 1; exit } uris = ""; has = 0 }
            /^[[:space:]]*$/ { flush(); next }
            /^URIs:/ { uris = $0; sub(/^URIs:[[:space:]]*/, "", uris) }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) has = 1 }
            END { flush() }' "$f")
        [ -n "$uri" ] && break
    done
    if [ -z "$uri" ]; then
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] || continue
            uri=$(awk -v suite="$suite" '
                $1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                              if ($(i + 1) == suite) { print $i; exit } }' "$f")
            [ -n "$uri" ] && break
        done
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

started=$(date +%s)
work=$(mktemp -d /tmp/agentmesh-image.XXXXXX)
# The root file system belongs to root; remove it even when a step failed.
trap 'rm -rf "$work"' EXIT

if docker image inspect "$base" >/dev/null 2>&1; then
    log "reusing the base image $base"
else
    [ "$(id -u)" -eq 0 ] || die "making the base image $base needs root (debootstrap); run as root once"
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap with apt"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    mirror=$(debian_mirror)
    log "making the base image $base: debootstrap $suite from $mirror"
    rootfs=$work/rootfs
    debootstrap --variant=minbase --include=ca-certificates,curl "$suite" "$rootfs" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || {
        tail -n 30 "$work/debootstrap.log" >&2
        die "debootstrap failed (log above)"
    }
    # Package caches are not part of an image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
    tar -C "$rootfs" --numeric-owner -c . |
        docker import \
            -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'ENV LANG=C.UTF-8' \
            -c 'CMD ["/bin/bash"]' \
            -m "debootstrap --variant=minbase $suite from $mirror" \
            - "$base" >/dev/null
    rm -rf "$rootfs"
    log "base image $base made in $(($(date +%s) - started)) s"
fi

# The build context: the binary and docker/'s runtime files, laid out as
# in the repository so both Dockerfiles copy the same paths.
ctx=$work/context
mkdir -p "$ctx/docker"
cp "$repo/docker/Dockerfile.offline" "$repo/docker/runtime-setup.sh" \
    "$repo/docker/agentmesh.toml" "$repo/docker/mesh-node.sh" "$ctx/docker/"
if command -v objcopy >/dev/null; then
    objcopy --strip-debug "$bin" "$ctx/agentmesh"
else
    cp "$bin" "$ctx/agentmesh"
fi
log "building $tag from $bin ($version, $(du -h "$ctx/agentmesh" | cut -f1) stripped)"
build_started=$(date +%s)
# The classic builder: it reads the local base image and pulls nothing.
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$base" \
    -f "$ctx/docker/Dockerfile.offline" -t "$tag" "$ctx" >/dev/null
now=$(date +%s)
log "built $tag in $((now - build_started)) s ($((now - started)) s in all)"
docker run --rm "$tag" --version
