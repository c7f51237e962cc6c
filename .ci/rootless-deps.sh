#!/usr/bin/env bash
# The rootless base-image test (tests/sandbox/test_base_rootless.py) runs build_base.sh as a user who is not
# root: Debian's mmdebstrap and uidmap, and a user of its own (agent-desk-rootless) with subordinate uid and
# gid ranges in /etc/subuid and /etc/subgid. Made when missing (as root); otherwise say so in one line and
# exit 0, or 1 when CI=true (where that test must not skip). Idempotent and quick when present.
set -euo pipefail

USER_NAME=agent-desk-rootless
NEEDED=(mmdebstrap uidmap)
have_tools() { command -v mmdebstrap >/dev/null 2>&1 && command -v newuidmap >/dev/null 2>&1; }
have_user() { id -u "$USER_NAME" >/dev/null 2>&1 && grep -q "^$USER_NAME:" /etc/subuid && grep -q "^$USER_NAME:" /etc/subgid; }

if have_tools && have_user; then exit 0; fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    if ! have_tools; then
        echo "rootless: installing ${NEEDED[*]} (Debian) for the rootless base-image test" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends "${NEEDED[@]}" >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${NEEDED[@]}" >/dev/null; }
    fi
    if ! id -u "$USER_NAME" >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$USER_NAME"
    fi
    # A range no other entry uses: past the highest one listed.
    for f in /etc/subuid /etc/subgid; do
        touch "$f"
        if ! grep -q "^$USER_NAME:" "$f"; then
            start=$(awk -F: 'BEGIN {m = 100000} {e = $2 + $3; if (e > m) m = e} END {print m}' "$f")
            echo "$USER_NAME:$start:65536" >>"$f"
        fi
    done
fi
if have_tools && have_user; then exit 0; fi
echo "rootless: mmdebstrap, uidmap or the user $USER_NAME with /etc/subuid and /etc/subgid ranges is missing" \
     "(run .ci/rootless-deps.sh as root); the rootless base-image test will be skipped"
if [[ "${CI:-}" == "true" ]]; then exit 1; fi
exit 0
