"""Test images beyond the default one: the python-less base image (the exec transport's), and a skip (a failure
in CI) when one is missing."""

from __future__ import annotations

from typing import Any

from tests.conftest import no_engine

# No python3, no ps, no rg: a DockerSandbox on it runs every call through the exec transport.
BASE_IMAGE = "agent-desk/base:bookworm"


def require_image(client: Any, name: str) -> None:
    """Skip (fail in CI) when the engine lacks the image `name`."""
    try:
        client.images.get(name)
    except Exception:
        no_engine(f"{name} is missing (sandbox_images/engine.sh builds it)")
