"""A file an MCP server wrote is rewound like any other: the server's call may write (its tools are not the
desk's to trust), so the workspace is checkpointed before it, and a rewind puts back the exact bytes."""

from __future__ import annotations

from pathlib import Path

from desktop_app.core import ToolCallState
from desktop_app.runtime import plan_rewind, run_rewind
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use

BEFORE = b'{"type":"entity","name":"kept","entityType":"note","observations":["as it was"]}\n'


async def test_a_file_an_mcp_server_wrote_is_rewound(desk_for, server: AnthropicServer, npm_bin: Path,
                                                      project: Path) -> None:
    memory = project / "memory.json"
    memory.write_bytes(BEFORE)
    desk = await desk_for({"memory": {"command": str(npm_bin / "mcp-server-memory"),
                                      "env": {"MEMORY_FILE_PATH": str(memory)}}}, mode="auto")
    server.add(reply(tool_use("mcp__memory__create_entities",
                              {"entities": [{"name": "new", "entityType": "note", "observations": ["added"]}]})),
               lambda req: reply(text("remembered")))
    session = await desk.rt.open_session()
    assert (await session.send("remember")).ok
    [call] = await desk.records(session.session.id)
    assert call.state is ToolCallState.COMPLETED and b'"new"' in memory.read_bytes()
    executing = next(e for e in call.trail if e.state is ToolCallState.EXECUTING)
    assert "checkpoint" in executing.data
    rewind = await plan_rewind(desk.rt.store, desk.rt.settings, session.session.id, call.id)
    assert rewind.plan.restore == ["memory.json"] and not rewind.plan.mine
    await run_rewind(desk.rt.store, desk.rt.bus, rewind, actor="person:test")
    assert memory.read_bytes() == BEFORE
