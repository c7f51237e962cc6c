"""Fixtures for the built-in tools: a real sandbox (LocalSandbox on a tmp folder, and DockerSandbox when an
engine answers) and a ToolContext whose streamed updates are recorded."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from desktop_app.core import Tool, ToolContext, ToolResult
from tests.conftest import in_ci

DOCKER_IMAGE_NAME = "minimal"  # catalog name; built on first use when missing
DOCKER_IMAGE = "agent-desk/minimal:latest"


class Updates:
    """What a tool streamed with ctx.update."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, str]] = []

    def __call__(self, text: str, stream: str = "stdout") -> None:
        self.chunks.append((stream, text))

    def text(self, stream: str = "stdout") -> str:
        return "".join(t for s, t in self.chunks if s == stream)


def _no_engine(reason: str) -> None:
    """Skip outside CI; in CI a missing engine is a failure."""
    if in_ci():
        pytest.fail(f"Docker engine required in CI: {reason}")
    pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture(scope="session")
def docker_workspace(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """One container for the whole session (kept running between tests), on one host folder."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        _no_engine(str(exc).splitlines()[0][:200])
    try:
        client.images.get(DOCKER_IMAGE)
    except Exception:
        from desktop_app.sandbox import build_image

        try:
            build_image(DOCKER_IMAGE_NAME, client=client)
        except Exception as exc:
            _no_engine(f"image {DOCKER_IMAGE} is missing and could not be built: {str(exc)[:200]}")
    folder = tmp_path_factory.mktemp("docker-ws")
    if os.geteuid() == 0:  # the container runs as uid 1000 when the folder's owner is root
        os.chown(folder, 1000, 1000)
    project = f"tools-test-{uuid.uuid4().hex[:8]}"
    yield project, str(folder)
    for c in client.containers.list(all=True, filters={"label": f"org.agent-desk.project={project}"}):
        c.remove(force=True)
    client.close()


@pytest.fixture
async def local_sandbox(tmp_path) -> AsyncIterator[Any]:
    from desktop_app.sandbox import LocalSandbox

    ws = tmp_path / "ws"
    ws.mkdir()
    sb = LocalSandbox(ws)
    await sb.start()
    try:
        yield sb
    finally:
        await sb.close()


@pytest.fixture
async def docker_sandbox(docker_workspace) -> AsyncIterator[Any]:
    from desktop_app.sandbox import DockerSandbox, SandboxConfig

    project, folder = docker_workspace
    sb = DockerSandbox(project, folder, SandboxConfig(image=DOCKER_IMAGE, keep_running=True))
    await sb.start()
    try:
        clean = await sb.exec("find /workspace -mindepth 1 -delete")
        assert clean.exit_code == 0, clean.stderr
        yield sb
    finally:
        await sb.close()


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request):
    """Every tool test runs on LocalSandbox, and again on DockerSandbox (marked `docker`)."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture
def updates() -> Updates:
    return Updates()


@pytest.fixture
def ctx(sandbox, updates) -> ToolContext:
    return ToolContext(call_id="call-1", session_id="session-1", sandbox=sandbox, _update=updates)


async def run_tool(tool: Tool, ctx: ToolContext, raw: dict[str, Any]) -> ToolResult:
    """Parse like the executor does, then run."""
    args = tool.parse(raw)
    await tool.validate(args, ctx)
    res = await tool.run(args, ctx)
    return ToolResult.text(res) if isinstance(res, str) else res


@pytest.fixture
def call(ctx):
    """`await call(tool, **input)` runs a tool in this test's context."""

    async def _call(tool: Tool, **raw: Any) -> ToolResult:
        return await run_tool(tool, ctx, raw)

    return _call
