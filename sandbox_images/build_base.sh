#!/usr/bin/env bash
# Make the base image agent-desk/base:bookworm with no registry at all: debootstrap a minimal Debian
# from the mirror the host's apt already uses, then `docker import` the tree. The tarball is cached so
# a machine builds it once. Usage: build_base.sh [--force]
set -euo pipefail

IMAGE="${AGENT_DESK_BASE_IMAGE:-agent-desk/base:bookworm}"
SUITE="${AGENT_DESK_BASE_SUITE:-bookworm}"
if [[ $(id -u) -eq 0 ]]; then
    CACHE_DIR="${AGENT_DESK_CACHE:-/var/cache/agent-desk}"
else
    CACHE_DIR="${AGENT_DESK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-desk}"
fi
TARBALL="$CACHE_DIR/base-$SUITE-$(dpkg --print-architecture 2>/dev/null || uname -m).tar"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

log() { echo "build_base: $*" >&2; }

# The first Debian mirror the host's apt uses (deb822 .sources or one-line sources.list), else the default.
host_mirror() {
    local uri
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' | grep -E '/debian/?$' | head -n1 || true)
    if [[ -z "$uri" ]]; then
        uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; break}}' \
            | grep -E '/debian/?$' | head -n1 || true)
    fi
    echo "${AGENT_DESK_DEBIAN_MIRROR:-${uri:-http://deb.debian.org/debian}}"
}

if [[ $FORCE -eq 0 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    log "$IMAGE already present"
    exit 0
fi

if [[ $FORCE -eq 1 || ! -s "$TARBALL" ]]; then
    command -v debootstrap >/dev/null || {
        log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
    [[ $(id -u) -eq 0 ]] || { log "debootstrap needs root (or a cached $TARBALL)"; exit 1; }
    mkdir -p "$CACHE_DIR"
    mirror=$(host_mirror)
    work=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    log "debootstrap --variant=minbase $SUITE from $mirror (a few minutes, once per machine)"
    debootstrap --variant=minbase "$SUITE" "$work" "$mirror" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
        tail -n 30 "$CACHE_DIR/debootstrap.log" >&2; exit 1; }
    # Images built on top use apt; keep updates next to main, drop caches to keep the layer small.
    printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$SUITE" "$mirror" "$SUITE" \
        >"$work/etc/apt/sources.list"
    rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/* "$work"/tmp/* "$work"/proc/* "$work"/sys/* \
        "$work"/dev/* 2>/dev/null || true
    tar --numeric-owner -C "$work" -cf "$TARBALL.partial" .
    mv "$TARBALL.partial" "$TARBALL"
    rm -rf "$work"
    trap - EXIT
    log "cached $TARBALL"
fi

log "importing $TARBALL as $IMAGE"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$IMAGE" >/dev/null
log "$IMAGE ready"
