#!/usr/bin/env bash
# The real keyring test (tests/test_keyring_real.py) needs a Secret Service: Debian's gnome-keyring, and
# dbus for a private session bus. Installed when missing (as root, with apt-get); otherwise say so in one
# line and exit 0, or 1 when CI=true (where that test must not skip). Idempotent and quick when present.
set -euo pipefail

NEEDED=(gnome-keyring dbus)
have_all() { command -v gnome-keyring-daemon >/dev/null 2>&1 && command -v dbus-run-session >/dev/null 2>&1; }

if have_all; then exit 0; fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "keyring: installing ${NEEDED[*]} (Debian) for the real keyring test" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${NEEDED[@]}" >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${NEEDED[@]}" >/dev/null; }
fi
if have_all; then exit 0; fi
echo "keyring: gnome-keyring-daemon or dbus-run-session is missing (apt-get install ${NEEDED[*]});" \
     "the real keyring test will be skipped"
if [[ "${CI:-}" == "true" ]]; then exit 1; fi
exit 0
