"""The Docker engine client: `connect()` and the plain reason shown for an engine's error. Its own module
here, beside the rooms that share it (docker/, images/, sync/), so that none imports another for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import SandboxError
from ._engine_link import engine_link, remote_failure

if TYPE_CHECKING:
    import docker

ENGINE_HINT = "start Docker, or set DOCKER_HOST"
ENGINE_HUNG_HINT = "restart dockerd (sudo systemctl restart docker), or set DOCKER_HOST to another engine"
# An engine's answer to /_ping (or /version) comes in milliseconds: one that accepts the connection and stays
# silent this long is named as hung, in seconds rather than after a whole request's wait (REQUEST_TIMEOUT_S,
# which image builds and big copies need).
ENGINE_PING_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60

_ENGINE_CAUSES = (
    ("FileNotFoundError", "nothing listens there: is dockerd running?"),
    ("Connection refused", "the connection was refused: is dockerd running?"),
    ("PermissionError", "permission denied: is your user allowed to use Docker (the docker group)?"),
    ("Permission denied", "permission denied: is your user allowed to use Docker (the docker group)?"),
    ("timed out", "the engine did not answer in time"),
)


def short_reason(exc: BaseException) -> str:
    """One line for a user: a plain cause for the usual engine failures, else the error's first line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for marker, plain in _ENGINE_CAUSES:
        if marker in text:
            return plain
    return text[:300]


def _timed_out(exc: BaseException) -> bool:
    # requests' ReadTimeout, or the SDK's DockerException around it when the version probe timed out
    return isinstance(exc, TimeoutError) or "timed out" in str(exc)


def _tls_client() -> docker.DockerClient:
    """A client for a TLS engine (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) that trusts only DOCKER_CERT_PATH's CA:
    requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE replace a client's own CA, so a verified engine would
    fail wherever those are set. The first client only asks the engine's API version (with the environment
    ignored); the second speaks it."""
    import docker
    from docker.constants import MINIMUM_DOCKER_API_VERSION

    probe = docker.from_env(timeout=ENGINE_PING_TIMEOUT_S, version=MINIMUM_DOCKER_API_VERSION)
    try:
        probe.api.trust_env = False
        version = probe.api.version(api_version=False)["ApiVersion"]
    finally:
        probe.close()
    client = docker.from_env(timeout=ENGINE_PING_TIMEOUT_S, version=version)  # connect() lengthens it after its ping
    client.api.trust_env = False
    return client


def connect() -> docker.DockerClient:
    """A client for the engine DOCKER_HOST names (or the default socket); SandboxError if none answers within
    ENGINE_PING_TIMEOUT_S. A remote engine's error names its address and the real cause (ssh, TLS, refused, unknown
    host, silent)."""
    import docker

    link = engine_link()
    client = None
    try:
        # The SDK asks the engine's API version as the client is made, then the ping: both within the short
        # bound; the SDK reads `timeout` at each request, so the client's later requests get the long one.
        client = _tls_client() if link.tls and link.scheme == "tcp" else docker.from_env(timeout=ENGINE_PING_TIMEOUT_S)
        client.ping()
        client.api.timeout = REQUEST_TIMEOUT_S
    except Exception as exc:
        if client is not None:
            client.close()
        if link.remote:
            cause, fix = remote_failure(link, exc)
            raise SandboxError(f"the remote Docker engine at {link.address} does not answer: {cause}",
                               hint=fix) from None
        if _timed_out(exc):
            raise SandboxError(f"no Docker engine answers at {link.address} (it took the connection but said "
                               f"nothing for {ENGINE_PING_TIMEOUT_S:g} s: is dockerd hung?)",
                               hint=ENGINE_HUNG_HINT) from None
        raise SandboxError(f"no Docker engine answers at {link.address} ({short_reason(exc)})",
                           hint=ENGINE_HINT) from None
    return client
