#!/usr/bin/env bash
# Make the base image agent-desk/base:bookworm, as root or not (desktop_app/sandbox/images/_base_plan.py
# chooses the method and says what is missing; its order is the one of `auto` here):
#   pull         a registry answers: pull debian:bookworm-slim ($AGENT_DESK_BASE_PULL) and tag it
#   debootstrap  as root, with no registry: debootstrap a minimal Debian from the host's apt mirror
#   mmdebstrap   not root, no registry: mmdebstrap --mode=unshare (a user namespace; uidmap and /etc/subuid)
# then `docker import` the tree. The tarball is cached so a machine builds it once.
# Usage: build_base.sh [--force] [--method auto|pull|debootstrap|mmdebstrap] [--tarball-only] [--where]
set -euo pipefail

IMAGE="${AGENT_DESK_BASE_IMAGE:-agent-desk/base:bookworm}"
SUITE="${AGENT_DESK_BASE_SUITE:-bookworm}"
if [[ $(id -u) -eq 0 ]]; then
    CACHE_DIR="${AGENT_DESK_CACHE:-/var/cache/agent-desk}"
else
    CACHE_DIR="${AGENT_DESK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-desk}"
fi
TARBALL="$CACHE_DIR/base-$SUITE-$(dpkg --print-architecture 2>/dev/null || uname -m).tar"
PULL="${AGENT_DESK_BASE_PULL-debian:bookworm-slim}"
FORCE=0
METHOD=auto
TARBALL_ONLY=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --force) FORCE=1 ;;
        --method) METHOD="${2:?--method needs auto, pull, debootstrap or mmdebstrap}"; shift ;;
        --tarball-only) TARBALL_ONLY=1 ;;  # make the cached tarball, import nothing (no engine needed)
        --where) echo "$TARBALL"; exit 0 ;;
        *) echo "build_base: unknown argument $1 (see the usage at the top of $0)" >&2; exit 2 ;;
    esac
    shift
done

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

try_pull() {
    [[ -n "$PULL" ]] || return 1
    log "pulling $PULL"
    docker pull "$PULL" >&2 || return 1
    docker tag "$PULL" "$IMAGE"
    log "$IMAGE ready (tagged from $PULL)"
}

# A minimal Debian tree, tarred to $TARBALL: debootstrap as root, else mmdebstrap in a user namespace.
make_tarball() {
    local how=$1 mirror work
    mkdir -p "$CACHE_DIR"
    mirror=$(host_mirror)
    if [[ $how == debootstrap ]]; then
        command -v debootstrap >/dev/null || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
        [[ $(id -u) -eq 0 ]] || { log "debootstrap needs root: without root, use --method mmdebstrap"; exit 1; }
        work=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
        trap 'rm -rf "$work"' EXIT
        log "debootstrap --variant=minbase $SUITE from $mirror (a few minutes, once per machine)"
        debootstrap --variant=minbase "$SUITE" "$work" "$mirror" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
            tail -n 30 "$CACHE_DIR/debootstrap.log" >&2; exit 1; }
        # Images built on top use apt; keep updates next to main, drop caches to keep the layer small.
        printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$SUITE" "$mirror" "$SUITE" \
            >"$work/etc/apt/sources.list"
        rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/* "$work"/tmp/* "$work"/proc/* \
            "$work"/sys/* "$work"/dev/* 2>/dev/null || true
        tar --numeric-owner -C "$work" -cf "$TARBALL.partial" .
        rm -rf "$work"
        trap - EXIT
    else
        command -v mmdebstrap >/dev/null || { log "mmdebstrap is not installed (apt-get install mmdebstrap uidmap)"; exit 1; }
        log "mmdebstrap --mode=unshare --variant=minbase $SUITE from $mirror (a minute or two, once per machine)"
        # The tree is made and tarred inside a user namespace (owned by root in the tar, numerically); the
        # mirror lines become its sources.list; apt's lists and caches are cleaned by mmdebstrap itself. Its
        # work folder stays in $TMPDIR or /tmp: the namespace's root (a subordinate id) must reach it, and a
        # home folder is often 0700 (Debian 12's default).
        mmdebstrap --mode=unshare --variant=minbase --format=tar "$SUITE" "$TARBALL.partial" \
            "deb $mirror $SUITE main" "deb $mirror $SUITE-updates main" >"$CACHE_DIR/mmdebstrap.log" 2>&1 || {
            rm -f "$TARBALL.partial"; tail -n 30 "$CACHE_DIR/mmdebstrap.log" >&2
            log "the rootless build failed: \`agent-desk doctor\` says what is missing (uidmap, /etc/subuid, user namespaces)"
            exit 1; }
    fi
    mv "$TARBALL.partial" "$TARBALL"
    log "cached $TARBALL"
}

if [[ $TARBALL_ONLY -eq 0 && $FORCE -eq 0 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    log "$IMAGE already present"
    exit 0
fi

if [[ $FORCE -eq 1 || ! -s "$TARBALL" ]]; then
    if [[ $METHOD == auto ]]; then
        if [[ $TARBALL_ONLY -eq 0 ]] && try_pull; then exit 0; fi
        if [[ $(id -u) -eq 0 ]] && command -v debootstrap >/dev/null; then METHOD=debootstrap; else METHOD=mmdebstrap; fi
    fi
    case "$METHOD" in
        pull) try_pull && exit 0; log "pulling $PULL failed (no registry answers?)"; exit 1 ;;
        debootstrap | mmdebstrap) make_tarball "$METHOD" ;;
        *) log "unknown method $METHOD (auto, pull, debootstrap or mmdebstrap)"; exit 2 ;;
    esac
fi
[[ $TARBALL_ONLY -eq 1 ]] && exit 0

log "importing $TARBALL as $IMAGE"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$IMAGE" >/dev/null
log "$IMAGE ready"
