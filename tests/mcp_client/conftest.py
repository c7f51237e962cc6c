"""MCP fixtures: the real servers (installed once per machine, see servers.py), settings kept in tmp, and a
project runtime on a real SQLite file and a LocalSandbox, driven by the local fake Anthropic server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import ConsentKind, ProjectInfo, Sandbox
from desktop_app.runtime import ProjectRuntime, approve, consents, open_runtime
from tests.fakes.anthropic_server import AnthropicServer
from tests.kit import Desk
from tests.mcp_client import servers
from tests.sandbox.conftest import test_network  # noqa: F401  (companions get a bridge of the tests' own)


@pytest.fixture(scope="session")
def py_bin() -> Path:
    return servers.python_servers()


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    return servers.node_servers() / "node_modules" / ".bin"


@pytest.fixture
def project(desk_env: Path) -> Path:
    folder = desk_env / "project"
    (folder / ".agent-desk").mkdir(parents=True)
    return folder


def write_config(folder: Path, servers_: dict[str, Any], *, grant_sandboxed: bool = True) -> None:
    """The project's mcp.json; the servers that run in the sandbox granted as the person would (those asking for
    more are left to each test, as is everything with grant_sandboxed=False)."""
    (folder / ".agent-desk" / "mcp.json").write_text(json.dumps({"mcpServers": servers_}))
    if grant_sandboxed:
        project = ProjectInfo("mcp", "mcp", str(folder))
        for consent in consents(project, ConsentKind.MCP):
            if consent.asks == "sandbox" and not consent.ok:
                approve(project, consent)


@pytest.fixture
async def desk_for(project: Path, server: AnthropicServer, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    opened: list[ProjectRuntime] = []

    async def make(servers_: dict[str, Any], *, mode: str = "ask", rules: str | None = None,
                   sandbox_factory: Callable[[Any], Sandbox] | None = None, **kw: Any) -> Desk:
        write_config(project, servers_)
        if rules is not None:
            from desktop_app.runtime import write_project_rules

            write_project_rules(project, rules)
        settings = Settings(base_url=server.url, api_key=server.api_key, sandbox="local", **kw)
        rt = await open_runtime(settings, project, db_url=str(tmp_path / "desk.db"), permission_mode=mode,
                                sandbox_factory=sandbox_factory)
        opened.append(rt)
        return Desk(rt)

    yield make
    for rt in opened:
        await rt.close()
