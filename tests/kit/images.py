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


def no_python_image(client: Any, base: str) -> str:
    """`base` with python3 removed, built once per version of `base` (tagged by its id): a DockerSandbox on it
    chooses the exec transport on its own, on the same tools and files as `base`."""
    import io

    base_id = client.images.get(base).id.split(":")[-1][:12]
    tag = f"agent-desk/test-no-python:{base_id}"
    try:
        client.images.get(tag)
    except Exception:
        dockerfile = f"FROM {base}\nRUN rm -f /usr/bin/python3 /usr/bin/python3.*\n"
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, network_mode="none")
    return tag
