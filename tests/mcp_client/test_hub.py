"""The hub with real servers: `tools/list_changed` followed, a server not ready yet absent from the model's
request (the window never waits for it), a project entry replacing the user's, and a large result truncated
by the same post hooks as every other tool's."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from desktop_app.config import Settings
from desktop_app.core import EventBus, McpServerState, ProjectInfo, ToolCallState
from desktop_app.mcp_client import load_servers
from desktop_app.runtime import ProjectRuntimes, open_store
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import SpySandbox, wait_until_async
from tests.mcp_client.conftest import write_config


async def test_tools_list_changed_is_followed(desk_for, npm_bin: Path) -> None:
    """server-everything registers its conditional tools after `initialized` and says so with
    notifications/tools/list_changed; the hub lists again and keeps the newest listing. The server may be
    ready before the test subscribes to the bus, so the test waits on the hub's state, not on one event."""
    SpySandbox.written = []
    desk = await desk_for({"everything": {"command": str(npm_bin / "mcp-server-everything")}},
                          sandbox_factory=lambda p: SpySandbox(p.path))
    server = desk.rt.mcp.servers["everything"]

    def listings() -> int:
        sent = [json.loads(x) for chunk in list(SpySandbox.written) for x in chunk.splitlines() if x.strip()]
        return sum(m.get("method") == "tools/list" for m in sent)

    def followed() -> bool:
        return (listings() >= 2 and server._kept == server._asked  # the first listing, and again on the notice
                and any(t.name == "simulate-research-query" for t in server.info.tools))

    assert await wait_until_async(followed, 60)
    assert "mcp__everything__simulate-research-query" in desk.rt.registry
    latest = desk.rt.mcp.server_infos()[0].to_dict()
    assert any(t["name"] == "simulate-research-query" for t in latest["tools"])


async def test_a_server_not_ready_is_absent_from_the_request(project: Path, tmp_path: Path, py_bin: Path) -> None:
    slow = {"command": "sh", "args": ["-c", f"read go < .go; exec {py_bin / 'mcp-server-time'}"]}
    write_config(project, {"time": slow})
    (project / ".go").unlink(missing_ok=True)
    os.mkfifo(project / ".go")
    with AnthropicServer([reply(text("first")), reply(text("second"))]) as srv:
        settings = Settings(base_url=srv.url, api_key=srv.api_key, sandbox="local")
        store = await open_store(str(tmp_path / "w.db"))
        runtimes = ProjectRuntimes(settings=settings, store=store, bus=await EventBus.open(store))
        try:
            info = ProjectInfo("prj_w", "w", str(project), settings={"sandbox": "local"})
            session = await runtimes(info, None)  # returns while the server waits on its pipe
            await session.send("hello")
            rt = runtimes.runtimes[info.id]
            assert rt.mcp_servers()[0].state is McpServerState.STARTING
            await asyncio.to_thread((project / ".go").write_text, "go\n")
            await asyncio.wait_for(rt.mcp.wait_started(), 60)
            await session.send("again")
            names = [[t["name"] for t in r.body["tools"]] for r in srv.requests]
            assert not any(n.startswith("mcp__") for n in names[0])
            assert "mcp__time__get_current_time" in names[1]
        finally:
            await runtimes.close()
            await store.close()


def test_a_project_entry_replaces_the_users_and_says_so(project: Path) -> None:
    write_config(project, {"time": {"command": "project-time"}})
    entries = load_servers(project, {"time": {"command": "user-time"}, "mine": {"command": "x"}})
    by = {e.name: e for e in entries}
    assert by["time"].source == "project" and by["time"].config.command == "project-time"
    assert "replaces the one in your settings" in by["time"].notes[0]
    assert by["mine"].source == "user"


async def test_a_large_result_is_truncated_like_any_other(desk_for, server: AnthropicServer, npm_bin: Path) -> None:
    desk = await desk_for({"everything": {"command": str(npm_bin / "mcp-server-everything")}}, mode="auto")
    server.add(reply(tool_use("mcp__everything__echo", {"message": "z" * 100_000})), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("echo")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.COMPLETED
    seen = server.requests[1].last_tool_result_text()
    assert len(seen) < 60_000 and "truncated" in seen.lower()


async def test_a_host_server_runs_through_the_sdks_stdio_client_marked_unsandboxed(
        desk_for, server: AnthropicServer, py_bin: Path) -> None:
    desk = await desk_for({}, mode="auto", mcp_servers={"clock": {"command": str(py_bin / "mcp-server-time"),
                                                                  "run": "host"}})
    [info] = desk.rt.mcp_servers()
    assert info.state is McpServerState.READY and info.where.value == "host" and info.source == "user"
    server.add(reply(tool_use("mcp__clock__get_current_time", {"timezone": "UTC"})), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("time")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.COMPLETED and record.result["details"]["mcp_where"] == "host"
    assert record.sandbox["kind"] == "host" and record.sandbox["unsandboxed"] is True
