"""The Docker engine client: `connect()` and the plain reason shown for an engine's error. Its own module
here, beside the rooms that share it (docker/, images/, sync/), so that none imports another for it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..core import SandboxError

if TYPE_CHECKING:
    import docker

ENGINE_HINT = "start Docker, or set DOCKER_HOST"

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


def connect() -> docker.DockerClient:
    """A client for the engine DOCKER_HOST names (or the default socket); SandboxError if none answers."""
    import docker

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:
        raise SandboxError(f"no Docker engine answers at {host} ({short_reason(exc)})", hint=ENGINE_HINT) from None
    return client
