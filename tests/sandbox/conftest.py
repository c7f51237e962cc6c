"""Fixtures for the sandbox tests: a real Docker engine (skip with one line without one, fail when
CI=true), and factories for project folders and DockerSandboxes that clean up after themselves."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_ci

TEST_IMAGE = os.environ.get("AGENT_DESK_TEST_IMAGE", "agent-desk/minimal:latest")
SANDBOX_UID = 1000  # the container's user when the folder's owner is root


def no_engine(reason: str) -> None:
    """Skip outside CI; in CI a missing engine is a failure."""
    if in_ci():
        pytest.fail(f"a Docker engine is required in CI: {reason}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker client for the engine DOCKER_HOST names, with the test image present."""
    from desktop_app.core import AgentDeskError
    from desktop_app.sandbox import connect

    try:
        client = connect()
    except AgentDeskError as exc:
        no_engine(str(exc))
    try:
        client.images.get(TEST_IMAGE)
    except Exception:
        no_engine(f"image {TEST_IMAGE} is missing (run sandbox_images/engine.sh)")
    yield client
    client.close()


def make_workspace(path: Path) -> Path:
    """A project folder the container's user can write (chowned to 1000 when we are root)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def project_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def make_docker_sandbox(docker_client, workspace, project_id) -> AsyncIterator[Callable[..., Any]]:
    """`await make(config=None, folder=workspace, project=project_id, start=True)`: a DockerSandbox;
    closed and its containers removed at the end of the test."""
    from desktop_app.sandbox import DockerSandbox, SandboxConfig

    made: list[Any] = []
    projects: set[str] = set()

    async def make(
        config: Any = None, *, folder: Path | None = None, project: str | None = None, start: bool = True
    ) -> Any:
        cfg = config or SandboxConfig(image=TEST_IMAGE)
        pid = project or project_id
        sb = DockerSandbox(pid, folder or workspace, cfg, client=docker_client)
        made.append(sb)
        projects.add(pid)
        if start:
            await sb.start()
        return sb

    yield make
    for sb in made:
        await sb.close()
    for pid in projects:
        for c in docker_client.containers.list(all=True, filters={"label": f"org.agent-desk.project={pid}"}):
            c.remove(force=True)


@pytest.fixture
async def docker_sandbox(make_docker_sandbox) -> Any:
    """A started DockerSandbox with the hardened defaults, on a fresh folder."""
    return await make_docker_sandbox()


def vm_rss_kib() -> int:
    """This process's resident set size, from /proc/self/status."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")
