#!/usr/bin/env bash
# Make sure a Docker engine answers and the test images exist, for `make test` from a fresh clone.
#  1. `docker info` answers: use that engine (whatever DOCKER_HOST names).
#  2. else, as root on Linux: install Debian's docker.io (+ debootstrap) if missing and start dockerd
#     in the background, its data, pidfile and log under $AGENT_DESK_DOCKERD_DIR (/tmp/agent-desk-dockerd).
#  3. else: say so in one line; exit 0, or 1 when CI=true.
# gVisor (RUNSC=1, or runsc on PATH): runsc is installed when asked and missing (Debian's runsc, as root) and
# registered in $AGENT_DESK_DOCKERD_DIR/daemon.json, the config file of the dockerd started here (a running one
# reloads it on SIGHUP); an engine started elsewhere is told how (runsc install, restart docker).
# Then build, when missing, the offline base image (build_base.sh) and the test images
# ($AGENT_DESK_TEST_IMAGES, default "minimal mcp"). Idempotent; the second run takes well under a second.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${AGENT_DESK_DOCKERD_DIR:-/tmp/agent-desk-dockerd}"
TEST_IMAGES="${AGENT_DESK_TEST_IMAGES:-minimal mcp}"
WAIT_S="${AGENT_DESK_DOCKERD_WAIT:-60}"

log() { echo "engine: $*" >&2; }
engine_up() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

unavailable() {
    echo "engine: Docker is not available ($1); Docker tests will be skipped"
    if [[ "${CI:-}" == "true" ]]; then exit 1; fi
    exit 0
}

# Is `pid` a live (not zombie) process called `name`? A pidfile can outlive its process, and the pid
# can come back as a zombie or as another program.
alive_as() {
    local pid="$1" name="$2"
    [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]] || return 1
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ]]
}

# A containerd killed together with its dockerd (at the end of a session, say) leaves its pidfile behind,
# and a new dockerd then waits for a containerd that never answers.
clear_stale_containerd() {
    local pidfile=/var/run/docker/containerd/containerd.pid
    [[ -s "$pidfile" ]] || return 0
    if ! alive_as "$(cat "$pidfile")" containerd; then
        log "removing a stale containerd pidfile"
        rm -f "$pidfile"
    fi
}

# The runtimes of the dockerd started here: runsc (gVisor) when wanted and installed. --network=none: the
# desk's sandboxes have no network unless a project turns it on, and runsc refuses a container's network
# namespace inside some VMs ("cannot run with network enabled in root network namespace").
want_runsc() { [[ "${RUNSC:-}" == 1 ]] || command -v runsc >/dev/null 2>&1; }
write_daemon_config() {
    mkdir -p "$STATE"
    local runsc
    runsc="$(command -v runsc 2>/dev/null || true)"
    if want_runsc && [[ -n "$runsc" ]]; then
        printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none"]}}}\n' "$runsc" >"$STATE/daemon.json"
    elif [[ ! -s "$STATE/daemon.json" ]]; then
        echo '{}' >"$STATE/daemon.json"
    fi
}
install_runsc() {
    [[ "${RUNSC:-}" == 1 ]] && ! command -v runsc >/dev/null 2>&1 || return 0
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "installing runsc (gVisor) with apt-get"
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >/dev/null \
            || log "runsc could not be installed: gVisor stays off (the sandboxes use runc)"
    else
        log "RUNSC=1: install runsc first (Debian: sudo apt-get install runsc)"
    fi
}
engine_has_runsc() { [[ "$(docker info --format '{{json .Runtimes}}' 2>/dev/null || true)" == *'"runsc"'* ]]; }
register_runsc() {
    want_runsc && command -v runsc >/dev/null 2>&1 || return 0
    engine_has_runsc && return 0
    local pid=""
    [[ -s "$STATE/dockerd.pid" ]] && pid="$(cat "$STATE/dockerd.pid")"
    # Only the dockerd started here reads $STATE/daemon.json: it reloads its runtimes on SIGHUP.
    if [[ -n "$pid" ]] && alive_as "$pid" dockerd && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--config-file"; then
        write_daemon_config
        kill -HUP "$pid"
        local deadline=$((SECONDS + 10))
        until engine_has_runsc; do
            ((SECONDS < deadline)) || { log "dockerd did not take runsc; see $STATE/dockerd.log"; return 0; }
            sleep 0.2
        done
        log "runsc (gVisor) registered with dockerd"
        return 0
    fi
    log "runsc is installed but this engine does not know it: sudo runsc install && sudo systemctl restart docker"
}

start_dockerd() {
    local need=()
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    command -v docker >/dev/null 2>&1 || need+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    if ((${#need[@]})); then
        command -v apt-get >/dev/null 2>&1 || unavailable "no dockerd and no apt-get to install it"
        log "installing ${need[*]} with apt-get"
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io debootstrap >/dev/null
    fi
    mkdir -p "$STATE"
    local pid=""
    if [[ -s "$STATE/dockerd.pid" ]] && alive_as "$(cat "$STATE/dockerd.pid")" dockerd; then
        pid="$(cat "$STATE/dockerd.pid")"
        log "dockerd $pid is already starting; waiting for it"
    else
        rm -f "$STATE/dockerd.pid"  # not a live dockerd: dockerd would refuse to start over it
        clear_stale_containerd
        write_daemon_config
        log "starting dockerd (data in $STATE/data, log in $STATE/dockerd.log)"
        setsid dockerd --data-root "$STATE/data" --pidfile "$STATE/dockerd.pid" --config-file "$STATE/daemon.json" \
            --host unix:///var/run/docker.sock >"$STATE/dockerd.log" 2>&1 </dev/null &
        pid=$!
    fi
    local deadline=$((SECONDS + WAIT_S))
    until docker info >/dev/null 2>&1; do
        if ((SECONDS >= deadline)) || ! kill -0 "$pid" 2>/dev/null; then
            log "dockerd did not answer within ${WAIT_S}s; the end of $STATE/dockerd.log:"
            tail -n 25 "$STATE/dockerd.log" >&2 || true
            if [[ "${CI:-}" == "true" ]]; then exit 1; fi
            echo "engine: Docker is not available (dockerd did not start); Docker tests will be skipped"
            exit 0
        fi
        sleep 0.5
    done
    log "dockerd is up (pid $(cat "$STATE/dockerd.pid" 2>/dev/null || echo "$pid"))"
}

# The tag of images.NAME in images.toml.
image_tag() {
    awk -v sect="[images.$1]" '
        $0 == sect {on = 1; next}
        /^\[/ {on = 0}
        on && $1 == "tag" {gsub(/"/, "", $3); print $3; exit}
    ' "$HERE/images.toml"
}
base_tag() {
    awk '/^\[base\]/ {on = 1; next} /^\[/ {on = 0} on && $1 == "base_image" {gsub(/"/, "", $3); print $3; exit}' \
        "$HERE/images.toml"
}

install_runsc
if ! engine_up; then
    if [[ $(id -u) -eq 0 && "$(uname -s)" == "Linux" ]]; then
        start_dockerd
    elif ! command -v docker >/dev/null 2>&1; then
        unavailable "no docker command"
    else
        unavailable "docker info does not answer; start Docker, or set DOCKER_HOST"
    fi
fi

register_runsc

BASE="${AGENT_DESK_BASE_IMAGE:-$(base_tag)}"
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    log "building the base image $BASE offline (debootstrap, cached under /var/cache/agent-desk)"
    AGENT_DESK_BASE_IMAGE="$BASE" "$HERE/build_base.sh"
fi

# What every build gets for registries behind a TLS proxy (as `agent-desk images build`): the CA bundle in the
# context as agent-desk-build-ca.crt (AGENT_DESK_BUILD_CA_BUNDLE: a file, or "none"; unset: the system's),
# the proxy variables as build arguments, and AGENT_DESK_BUILD_NETWORK as the build's network when set.
ca_bundle() {
    local chosen="${AGENT_DESK_BUILD_CA_BUNDLE-}"
    if [[ -z "${AGENT_DESK_BUILD_CA_BUNDLE+set}" ]]; then
        for chosen in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
            [[ -f "$chosen" ]] && { echo "$chosen"; return; }
        done
        return 0
    fi
    [[ -z "$chosen" || "${chosen,,}" == none ]] && return 0
    [[ -f "$chosen" ]] || { log "AGENT_DESK_BUILD_CA_BUNDLE=$chosen is not a file"; exit 1; }
    echo "$chosen"
}
build_args() {
    local v
    for v in HTTP_PROXY HTTPS_PROXY NO_PROXY FTP_PROXY ALL_PROXY http_proxy https_proxy no_proxy ftp_proxy all_proxy; do
        [[ -n "${!v-}" ]] && printf -- '--build-arg\n%s=%s\n' "$v" "${!v}"
    done
    [[ -n "${AGENT_DESK_BUILD_NETWORK-}" ]] && printf -- '--network\n%s\n' "$AGENT_DESK_BUILD_NETWORK"
    return 0
}
build_one() {  # NAME TAG
    local ctx bundle out args=()
    bundle="$(ca_bundle)"
    ctx="$(mktemp -d)"
    cp -a "$HERE/$1/." "$ctx/"
    if [[ -n "$bundle" ]]; then cp "$bundle" "$ctx/agent-desk-build-ca.crt"; else : >"$ctx/agent-desk-build-ca.crt"; fi
    mapfile -t args < <(build_args)
    if ! out="$(DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE" "${args[@]}" -t "$2" "$ctx" 2>&1)"; then
        rm -rf "$ctx"
        echo "$out" | tail -n 25 >&2
        log "building $2 failed"
        exit 1
    fi
    rm -rf "$ctx"
}

for name in $TEST_IMAGES; do
    tag="$(image_tag "$name")"
    [[ -n "$tag" ]] || { log "no image called $name in images.toml"; exit 1; }
    if docker image inspect "$tag" >/dev/null 2>&1; then
        continue
    fi
    log "building $tag (BASE=$BASE)"
    build_one "$name" "$tag"
done
log "ready: $(docker version --format '{{.Server.Version}}' 2>/dev/null) with $BASE ${TEST_IMAGES}"
