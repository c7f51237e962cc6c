"""Fixtures for the built-in tools: a real sandbox (local on a tmp folder, or Docker) and a ToolContext."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from desktop_app.core._tool import Tool, ToolContext, ToolResult


class Updates:
    """What a tool streamed with ctx.update, and an event set on each chunk."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, str]] = []

    def __call__(self, text: str, stream: str) -> None:
        self.chunks.append((stream, text))

    def text(self, stream: str = "stdout") -> str:
        return "".join(t for s, t in self.chunks if s == stream)


@pytest.fixture
async def local_sandbox(tmp_path) -> AsyncIterator[Any]:
    try:
        from desktop_app.sandbox import LocalSandbox
    except ImportError:  # until the sandbox package exports it
        from desktop_app.sandbox._local import LocalSandbox

    ws = tmp_path / "ws"
    ws.mkdir()
    sb = LocalSandbox(ws)
    await sb.start()
    try:
        yield sb
    finally:
        await sb.close()


@pytest.fixture
def sandbox(local_sandbox):
    return local_sandbox


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
