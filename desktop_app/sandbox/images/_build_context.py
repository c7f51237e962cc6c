"""What every image build gets for reaching registries through a TLS proxy: the host's CA bundle as a file in
the build context (`agent-desk-build-ca.crt`, empty when none) and the proxy variables as build arguments.
A Dockerfile uses the bundle only in the step that fetches (pip's and npm's CA options), never in its image."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from ...core import ConfigError

CA_ENV = "AGENT_DESK_BUILD_CA_BUNDLE"  # a file, or "none"; unset: the system bundle
NETWORK_ENV = "AGENT_DESK_BUILD_NETWORK"  # the network of the build's RUN steps; unset: the engine's default
CA_FILE = "agent-desk-build-ca.crt"
SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/cert.pem",  # macOS, the BSDs
)
# Docker's predefined build arguments: used by a RUN step, never kept in the image's history.
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "FTP_PROXY", "ALL_PROXY")
MAX_BUNDLE = 16 * 1024 * 1024


def build_ca_bundle() -> Path | None:
    """The CA bundle a build trusts for its fetching step: $AGENT_DESK_BUILD_CA_BUNDLE (a file, or "none"),
    else the system's bundle when there is one."""
    chosen = os.environ.get(CA_ENV)
    if chosen is None:
        return next((Path(p) for p in SYSTEM_BUNDLES if os.path.isfile(p)), None)
    if chosen.strip().lower() in ("", "none"):
        return None
    path = Path(chosen).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"{CA_ENV}={chosen} is not a file",
            hint="name a PEM bundle of the CAs to trust (your proxy's included), or set it to none",
        )
    return path


def build_proxy_args(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The proxy variables of this environment (either case), as Docker's build arguments."""
    env = os.environ if environ is None else environ
    out = {}
    for name in PROXY_VARS:
        for key in (name, name.lower()):
            if env.get(key):
                out[key] = env[key]
    return out


def build_network() -> str | None:
    return os.environ.get(NETWORK_ENV) or None


def _bundle_bytes(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the build CA bundle {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BUNDLE or b"-----BEGIN CERTIFICATE-----" not in data:
        raise ConfigError(f"{path} is not a PEM CA bundle", hint=f"point {CA_ENV} at one, or set it to none")
    return data


def build_context(directory: Path) -> IO[bytes]:
    """The image's folder as a tar stream, with the CA bundle beside its Dockerfile (spooled to disk when
    large). Symlinks are kept as links, as `docker build` does."""
    bundle = _bundle_bytes(build_ca_bundle())
    out = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path in sorted(directory.rglob("*")):
            if path.name != CA_FILE:
                tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
        info = tarfile.TarInfo(CA_FILE)
        info.size, info.mode = len(bundle), 0o644
        tar.addfile(info, io.BytesIO(bundle))
    out.seek(0)
    return out
