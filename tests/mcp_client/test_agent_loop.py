"""MCP tools through the whole agent loop: the fake Anthropic server asks for calls, real servers from PyPI
and npm answer them in a LocalSandbox, and the policy, approvals, records and events are the desk's own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from desktop_app.core import Deny, ToolCallState
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use


def time_server(py_bin: Path) -> dict:
    return {"command": str(py_bin / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}


def everything(npm_bin: Path) -> dict:
    return {"command": str(npm_bin / "mcp-server-everything")}


async def test_an_approved_call_runs_and_its_record_says_where(desk_for, server: AnthropicServer,
                                                               npm_bin: Path) -> None:
    desk = await desk_for({"everything": everything(npm_bin)})
    server.add(reply(tool_use("mcp__everything__toggle-simulated-logging", {})),
               lambda req: reply(text(f"got {req.last_tool_result_text()[:40]}")))
    session = await desk.rt.open_session()
    result = await session.send("toggle it")
    assert result.reason == "end_turn", result
    asked = desk.of("permission_required")
    assert [a.name for a in asked] == ["mcp__everything__toggle-simulated-logging"]
    assert "can change things" in asked[0].reason and asked[0].risk == "medium"
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.COMPLETED
    assert record.result["details"]["mcp_server"] == "everything"
    assert record.result["details"]["mcp_server_version"].startswith("mcp-servers/everything")
    assert record.result["details"]["mcp_where"] == "sandbox"
    assert record.sandbox["kind"] == "local" and record.sandbox["unsandboxed"] is True
    tools = [t["name"] for t in server.requests[0].body["tools"]]
    assert "mcp__everything__echo" in tools and "fs_read" in tools


async def test_a_denial_note_reaches_the_model(desk_for, server: AnthropicServer, npm_bin: Path) -> None:
    desk = await desk_for({"memory": {"command": str(npm_bin / "mcp-server-memory")}})
    desk.answer = lambda ev: Deny(note="not the knowledge graph today")
    server.add(reply(tool_use("mcp__memory__create_entities",
                              {"entities": [{"name": "a", "entityType": "t", "observations": []}]})),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("remember a")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.DENIED
    assert "not the knowledge graph today" in server.requests[1].last_tool_result_text()


async def test_read_only_calls_run_in_parallel(desk_for, server: AnthropicServer, npm_bin: Path) -> None:
    """The person's own server (settings, not the project): its read-only hint is taken at its word."""
    desk = await desk_for({}, mcp_servers={"everything": everything(npm_bin)})
    slow = {"duration": 2, "steps": 2}
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", slow),
                     tool_use("mcp__everything__trigger-long-running-operation", slow)),
               lambda req: reply(text("both done")))
    session = await desk.rt.open_session()
    assert (await session.send("two at once")).reason == "end_turn"
    assert not desk.of("permission_required")  # read-only: asked nobody in ask mode
    states = [(e.call_id, e.state) for e in desk.of("state_changed") if e.state in ("EXECUTING", "COMPLETED")]
    first_done = next(i for i, (_, s) in enumerate(states) if s == "COMPLETED")
    assert len({cid for cid, s in states[:first_done] if s == "EXECUTING"}) == 2  # both ran before either ended
    records = await desk.records(session.session.id)
    assert all(r.read_only and r.state is ToolCallState.COMPLETED for r in records)


async def test_a_project_servers_read_only_hint_does_not_waive_approval(desk_for, server: AnthropicServer,
                                                                       npm_bin: Path) -> None:
    """A repository's server claims its tool only reads: the call is still scheduled as a read, but in ask
    mode the person is asked (the hint is the server's word, not the desk's)."""
    desk = await desk_for({"everything": everything(npm_bin)})
    tool = "mcp__everything__trigger-long-running-operation"
    assert desk.rt.registry.get(tool).read_only  # the hint still schedules it as a read
    server.add(reply(tool_use(tool, {"duration": 0.1, "steps": 1})), lambda req: reply(text("ok")))
    desk.answer = lambda ev: Deny(note="not today")
    session = await desk.rt.open_session()
    assert (await session.send("go")).reason == "end_turn"
    asked = desk.of("permission_required")
    assert [e.name for e in asked] == [tool]
    records = await desk.records(session.session.id)
    assert [r.state for r in records] == [ToolCallState.DENIED]


async def test_progress_arrives_as_tool_updates(desk_for, server: AnthropicServer, npm_bin: Path) -> None:
    desk = await desk_for({"everything": everything(npm_bin)})
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 1, "steps": 3})),
               lambda req: reply(text("done")))
    session = await desk.rt.open_session()
    await session.send("go")
    updates = [e.text for e in desk.of("tool:update")]
    assert any("1/3" in u for u in updates) and any("3/3" in u for u in updates), updates


async def test_an_image_result_reaches_the_model_as_an_image(desk_for, server: AnthropicServer,
                                                             npm_bin: Path) -> None:
    desk = await desk_for({"everything": everything(npm_bin)})
    server.add(reply(tool_use("mcp__everything__get-tiny-image", {}),
                     tool_use("mcp__everything__get-resource-reference", {"resourceType": "Text", "resourceId": 1})),
               lambda req: reply(text("seen")))
    session = await desk.rt.open_session()
    await session.send("show me")
    blocks = [b for r in server.requests[1].tool_results() for b in r["content"]]
    assert any(b["type"] == "image" and b["source"]["media_type"] == "image/png" for b in blocks)
    assert any(b["type"] == "text" and b["text"].startswith("[resource ") for b in blocks)


async def test_a_server_killed_mid_call_fails_the_call_then_restarts(desk_for, server: AnthropicServer,
                                                                     npm_bin: Path, project: Path) -> None:
    wrapped = {"command": "sh", "args": ["-c", "echo $$ > .mcp.pid; echo 'everything is starting' >&2; "
                                         f"exec {npm_bin / 'mcp-server-everything'}"]}
    desk = await desk_for({"everything": wrapped})
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 30, "steps": 30})),
               lambda req: reply(tool_use("mcp__everything__echo", {"message": "again"})),
               lambda req: reply(text("fine")))
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("go"))
    await desk.wait_for(lambda e: getattr(e, "type", "") == "tool:update")
    pid = (project / ".mcp.pid").read_text().strip()
    await desk.rt.sandbox.exec(f"kill -9 {pid}")
    assert (await turn).reason == "end_turn"
    first, second = await desk.records(session.session.id)
    assert first.state is ToolCallState.FAILED
    assert "ended" in first.error and "everything is starting" in first.error
    assert second.state is ToolCallState.COMPLETED and "again" in second.result["content"][0]["text"]
    states = [s["state"] for ev in desk.of("mcp:servers") for s in ev.servers]
    assert "restarting" in states and states[-1] == "ready"
