"""The kit's fixtures, loaded for the whole suite by tests/conftest.py (`pytest_plugins`): the isolated desk
environment, the fake Anthropic server, and a project's runtime on Docker recorded as a Desk."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import ProjectInfo
from desktop_app.runtime import open_runtime
from tests.conftest import TEST_IMAGE, make_workspace, remove_project
from tests.fakes.anthropic_server import AnthropicServer
from tests.kit.desk import Desk
from tests.kit.env import isolate


@pytest.fixture
def desk_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's desk under tmp_path (cfg/, data/, keys in files), with no inherited Anthropic key or
    endpoint; returns tmp_path."""
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    """A fresh fake Anthropic server on loopback for this test (its script starts empty: `server.add(...)`)."""
    with AnthropicServer() as srv:
        yield srv


@pytest.fixture
async def desk_for(docker_client: Any, desk_env: Path, server: AnthropicServer) -> AsyncIterator[Callable[..., Any]]:
    """`await desk_for(mode=..., settings=..., template=..., **settings_fields)`: a Desk over a project's runtime
    on a real DockerSandbox and a SQLite file, talking to `server`; closed and its containers removed after.
    (tests/mcp_client/conftest.py has its own desk_for: MCP servers on a LocalSandbox.)"""
    project = make_workspace(desk_env / "project")
    (project / "notes.txt").write_text("the answer is 42\n")
    opened: list[Any] = []

    async def make(*, mode: str = "ask", settings: dict[str, Any] | None = None, template: str | None = None,
                   **overrides: Any) -> Desk:
        info = ProjectInfo(id=f"sub-{uuid.uuid4().hex[:8]}", name="p", path=str(project), image=TEST_IMAGE,
                           settings=settings or {})
        rt = await open_runtime(Settings(base_url=server.url, api_key=server.api_key, **overrides), info,
                                db_url=str(desk_env / "desk.db"), permission_mode=mode, template=template)
        opened.append(rt)
        return Desk(rt)

    yield make
    for rt in opened:
        await rt.close()
        remove_project(docker_client, rt.project.id)
