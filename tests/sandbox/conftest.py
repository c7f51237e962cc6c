"""Fixtures for the sandbox tests: a real Docker engine (skip with one line without one, fail when
CI=true), and factories for project folders and DockerSandboxes that clean up after themselves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_IMAGE, make_workspace, remove_project


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
        remove_project(docker_client, pid)


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


@pytest.fixture(scope="session")
def test_network(docker_client) -> Iterator[str]:
    """A bridge network of the tests' own (`docker network create`), for companion containers: its own
    Linux bridge, so the tests do not depend on the engine's default docker0."""
    name = f"agent-desk-test-{uuid.uuid4().hex[:8]}"
    net = docker_client.networks.create(name, driver="bridge", labels={"org.agent-desk.test": "1"})
    yield name
    for c in docker_client.containers.list(all=True, filters={"network": name}):
        c.remove(force=True)
    net.remove()


@pytest.fixture
async def make_remote_sandbox(remote_engine, workspace, project_id) -> AsyncIterator[Callable[..., Any]]:
    """`await make(config=None, folder=workspace, project=project_id)`: a started DockerSandbox on the second
    engine (so its workspace is synced); closed, and its containers and volumes removed, at the end."""
    from desktop_app.sandbox import DockerSandbox, SandboxConfig

    client, _ = remote_engine
    made: list[Any] = []

    async def make(config: Any = None, *, folder: Path | None = None, project: str | None = None) -> Any:
        sb = DockerSandbox(project or project_id, folder or workspace, config or SandboxConfig(image=TEST_IMAGE),
                           client=client)
        made.append(sb)
        await sb.start()
        return sb

    yield make
    for sb in made:
        await sb.close()
        remove_project(client, sb.project_id)
