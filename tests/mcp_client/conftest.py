"""MCP fixtures: the real servers (installed once per machine, see servers.py), settings kept in tmp, and a
project runtime on a real SQLite file and a LocalSandbox, driven by the local fake Anthropic server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import Allow, ApprovalDecision, Sandbox
from desktop_app.runtime import ProjectRuntime, open_runtime
from tests.fakes.anthropic_server import AnthropicServer
from tests.mcp_client import servers
from tests.sandbox.conftest import test_network  # noqa: F401  (companions get a bridge of the tests' own)


@pytest.fixture(scope="session")
def py_bin() -> Path:
    return servers.python_servers()


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    return servers.node_servers() / "node_modules" / ".bin"


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    folder = tmp_path / "project"
    (folder / ".agent-desk").mkdir(parents=True)
    return folder


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as srv:
        yield srv


def write_config(folder: Path, servers_: dict[str, Any]) -> None:
    (folder / ".agent-desk" / "mcp.json").write_text(json.dumps({"mcpServers": servers_}))


class Desk:
    """A runtime with its events and an answerer for approvals."""

    def __init__(self, rt: ProjectRuntime) -> None:
        self.rt = rt
        self.events: list[Any] = []
        self.answer: Callable[[Any], ApprovalDecision | None] = lambda ev: Allow()
        self._seen = asyncio.Event()
        rt.bus.on("*", self._on)

    def _on(self, env: Any) -> None:
        self.events.append(env.event)
        self._seen.set()
        if env.type == "permission_required":
            decision = self.answer(env.event)
            if decision is not None:
                asyncio.get_running_loop().call_soon(self.rt.executor.decide, env.event.call_id, decision)

    def of(self, type_: str) -> list[Any]:
        return [e for e in self.events if getattr(e, "type", "") == type_]

    async def wait_for(self, pred: Callable[[Any], bool], within_s: float = 60) -> Any:
        async with asyncio.timeout(within_s):
            while True:
                hit = next((e for e in self.events if pred(e)), None)
                if hit is not None:
                    return hit
                self._seen.clear()
                await self._seen.wait()

    async def records(self, session_id: str) -> list[Any]:
        await self.rt.store.flush()
        return await self.rt.store.session_records(session_id)


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
