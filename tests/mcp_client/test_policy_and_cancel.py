"""Rules naming MCP tools (`mcp__server__*`, `group:mcp`) in the agent loop, a malformed config beside good
servers, and an abort that cancels the request at the server (notifications/cancelled on its stdin)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from desktop_app.core import McpServerState, ToolCallState
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import SpySandbox

NOW = {"timezone": "UTC"}


def time_server(py_bin: Path) -> dict[str, Any]:
    return {"command": str(py_bin / "mcp-server-time")}


async def test_a_deny_rule_on_every_tool_of_a_server(desk_for, server: AnthropicServer, py_bin: Path) -> None:
    desk = await desk_for({"time": time_server(py_bin)}, mode="auto",
                          rules='[permissions]\ndeny = ["mcp__time__*"]\n')
    server.add(reply(tool_use("mcp__time__get_current_time", NOW)), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("what time is it")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.DENIED
    assert record.provenance[0].detail == "mcp__time__*" and record.provenance[0].source.startswith("project:")
    assert "deny rule refuses mcp__time__get_current_time" in server.requests[1].last_tool_result_text()


async def test_group_mcp_asks_even_in_auto_mode(desk_for, server: AnthropicServer, py_bin: Path) -> None:
    desk = await desk_for({"time": time_server(py_bin)}, mode="auto", rules='[permissions]\nask = ["group:mcp"]\n')
    server.add(reply(tool_use("mcp__time__get_current_time", NOW)), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("what time is it")
    [asked] = desk.of("permission_required")
    assert asked.provenance[0]["detail"] == "group:mcp"
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.COMPLETED and "UTC" in record.result["content"][0]["text"]


async def test_a_destructive_tool_is_high_risk_and_asks_in_auto(desk_for, server: AnthropicServer,
                                                                npm_bin: Path) -> None:
    desk = await desk_for({"memory": {"command": str(npm_bin / "mcp-server-memory")}}, mode="auto")
    server.add(reply(tool_use("mcp__memory__delete_entities", {"entityNames": ["x"]})), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("forget x")
    [asked] = desk.of("permission_required")
    assert asked.risk == "high" and "marked destructive" in asked.reason


async def test_bad_input_names_the_field(desk_for, server: AnthropicServer, py_bin: Path) -> None:
    desk = await desk_for({"time": time_server(py_bin)}, mode="auto")
    server.add(reply(tool_use("mcp__time__convert_time", {"source_timezone": "UTC", "time": 12})),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("convert")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.FAILED
    assert "field `time`" in record.error and "field `target_timezone`" in record.error


async def test_a_malformed_entry_fails_alone(desk_for, server: AnthropicServer, py_bin: Path) -> None:
    desk = await desk_for({"time": time_server(py_bin), "broken": {"command": "x", "args": "not-a-list"},
                           "old": {"url": "https://example.com/sse", "type": "sse"}})
    infos = {i.name: i for i in desk.rt.mcp_servers()}
    assert infos["time"].state is McpServerState.READY
    assert infos["broken"].state is McpServerState.FAILED
    assert "mcp.json" in infos["broken"].error and "'broken'" in infos["broken"].error
    assert "'args'" in infos["broken"].error
    assert infos["old"].state is McpServerState.FAILED and "SSE" in infos["old"].error


async def test_a_file_that_is_not_json_leaves_the_users_servers(desk_for, project: Path, py_bin: Path) -> None:
    desk = await desk_for({}, mcp_servers={"time": time_server(py_bin)})
    await desk.rt.close()
    (project / ".agent-desk" / "mcp.json").write_text('{"mcpServers": {"x": ')
    from desktop_app.config import Settings
    from desktop_app.runtime import open_runtime

    rt = await open_runtime(Settings(api_key="sk-x", sandbox="local", mcp_servers={"time": time_server(py_bin)}),
                            project, db_url=str(project.parent / "desk2.db"))
    try:
        infos = {i.name: i for i in rt.mcp_servers()}
        assert infos["time"].state is McpServerState.READY and infos["time"].source == "user"
        assert infos["mcp.json"].state is McpServerState.FAILED and "not valid JSON" in infos["mcp.json"].error
    finally:
        await rt.close()


async def test_an_abort_cancels_the_request_at_the_server(desk_for, server: AnthropicServer, npm_bin: Path) -> None:
    SpySandbox.written = []
    desk = await desk_for({"everything": {"command": str(npm_bin / "mcp-server-everything")}},
                          sandbox_factory=lambda p: SpySandbox(p.path))
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 60, "steps": 60})),
               lambda req: reply(text("stopped")))
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("go"))
    await desk.wait_for(lambda e: getattr(e, "type", "") == "tool:update")
    session.stop()
    await turn
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.FAILED and record.outcome.value == "interrupted"
    sent = [json.loads(line) for chunk in SpySandbox.written for line in chunk.splitlines() if line.strip()]
    call = next(m for m in sent if m.get("method") == "tools/call")
    async with asyncio.timeout(10):
        while not any(m.get("method") == "notifications/cancelled" for m in sent):
            await asyncio.sleep(0.05)
            sent = [json.loads(line) for chunk in SpySandbox.written for line in chunk.splitlines() if line.strip()]
    cancel = next(m for m in sent if m.get("method") == "notifications/cancelled")
    assert cancel["params"]["requestId"] == call["id"]
