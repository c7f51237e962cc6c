"""The agent-loop MCP tests again with the servers inside the project's DockerSandbox (the `mcp` image, whose
servers come from PyPI and npm at build time), plus a `sandbox+network` server in a companion container."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import Channel, ConsentKind, Deny, McpServerState, ProjectInfo, ToolCallState
from desktop_app.runtime import approve, consents, open_runtime
from tests.conftest import make_workspace, remove_project
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.mcp_client.conftest import Desk, write_config
from tests.sandbox.mcp_wire import need_mcp_image

pytestmark = pytest.mark.docker
EVERYTHING = {"command": "mcp-server-everything"}


@pytest.fixture
async def docker_desk(docker_client, project: Path, server: AnthropicServer, tmp_path: Path,
                      test_network: str) -> AsyncIterator[Callable[..., Any]]:
    image = need_mcp_image(docker_client)
    make_workspace(project)
    opened: list[Any] = []

    async def make(servers_: dict[str, Any], *, mode: str = "ask", settings: dict[str, Any] | None = None) -> Desk:
        write_config(project, servers_)
        info = ProjectInfo(id=f"mcp-{os.urandom(4).hex()}", name="p", path=str(project), image=image,
                           settings=settings or {})
        rt = await open_runtime(Settings(base_url=server.url, api_key=server.api_key), info,
                                db_url=str(tmp_path / "desk.db"), permission_mode=mode,
                                companion_factory=lambda box, name: box.companion(name, network=test_network))
        opened.append(rt)
        return Desk(rt)

    yield make
    for rt in opened:
        await rt.close()
        remove_project(docker_client, rt.project.id)


def assert_overlapped(desk: Desk, name: str) -> None:
    """Each of the two calls of `name` started running before the other one ended."""
    at: dict[tuple[str, str], int] = {}
    for i, e in enumerate(desk.of("state_changed")):
        if e.name == name and e.state in ("EXECUTING", "COMPLETED"):
            at.setdefault((e.call_id, e.state), i)
    a, b = sorted({cid for cid, _ in at})
    assert at[(a, "EXECUTING")] < at[(b, "COMPLETED")] and at[(b, "EXECUTING")] < at[(a, "COMPLETED")]


async def test_approval_denial_and_the_record_in_docker(docker_desk, server: AnthropicServer) -> None:
    desk = await docker_desk({"everything": EVERYTHING, "memory": {"command": "mcp-server-memory"}})
    answers = iter([None, Deny(note="keep the graph as it is")])
    desk.answer = lambda ev: next(answers) or __import__("desktop_app.core", fromlist=["Allow"]).Allow()
    server.add(reply(tool_use("mcp__everything__toggle-simulated-logging", {})),
               lambda req: reply(tool_use("mcp__memory__create_entities",
                                          {"entities": [{"name": "a", "entityType": "t", "observations": []}]})),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("go")
    first, second = await desk.records(session.session.id)
    assert first.state is ToolCallState.COMPLETED
    assert first.sandbox["kind"] == "docker" and first.sandbox["unsandboxed"] is False
    assert first.sandbox["network"] == "none" and first.sandbox["container_id"]
    assert first.result["details"]["mcp_where"] == "sandbox"
    assert second.state is ToolCallState.DENIED
    assert "keep the graph as it is" in server.requests[2].last_tool_result_text()
    # each server's start is recorded with the container and image it ran in, and the grant it ran under
    await desk.rt.store.flush()
    stored = await desk.rt.store.events_since(0, [Channel.CONTROL])
    lives = [e.payload for e in stored if e.type == "mcp:life"]
    started = {p["server"]: p for p in lives if p["what"] == "started"}
    assert set(started) == {"everything", "memory"}
    assert started["everything"]["container_id"] == first.sandbox["container_id"]
    assert started["everything"]["image_digest"] and not started["everything"]["unsandboxed"]
    assert started["everything"]["consent_digest"] and started["everything"]["where"] == "sandbox"


async def test_read_only_calls_run_in_parallel_in_docker(docker_desk, server: AnthropicServer) -> None:
    """Two reads of named pipes: each blocks until the pipe is written, and the pipes are written only once
    both calls run, so the turn ends only if they ran at the same time."""
    # auto: a project server's read-only hint does not waive approval in ask mode (see test_agent_loop)
    desk = await docker_desk({"files": {"command": "mcp-server-filesystem", "args": ["/workspace"]}}, mode="auto")
    await desk.rt.sandbox.exec("mkfifo /workspace/p1 /workspace/p2")
    read = "mcp__files__read_text_file"
    server.add(reply(tool_use(read, {"path": "/workspace/p1"}), tool_use(read, {"path": "/workspace/p2"})),
               lambda req: reply(text("both read")))
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("read both"))
    running = lambda e: getattr(e, "type", "") == "state_changed" and e.state == "EXECUTING"  # noqa: E731
    await desk.wait_for(lambda e: sum(map(running, desk.events)) >= 2)
    await desk.rt.sandbox.exec("echo one > /workspace/p1; echo two > /workspace/p2")
    assert (await turn).reason == "end_turn"
    assert not desk.of("permission_required")
    records = await desk.records(session.session.id)
    assert [r.state for r in records] == [ToolCallState.COMPLETED] * 2 and all(r.read_only for r in records)
    assert_overlapped(desk, read)


async def test_progress_and_an_image_in_docker(docker_desk, server: AnthropicServer) -> None:
    desk = await docker_desk({"everything": EVERYTHING}, mode="auto")
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 1, "steps": 2}),
                     tool_use("mcp__everything__get-tiny-image", {})),
               lambda req: reply(text("done")))
    session = await desk.rt.open_session()
    await session.send("go")
    assert any("2/2" in e.text for e in desk.of("tool:update"))
    blocks = [b for r in server.requests[1].tool_results() for b in r["content"]]
    assert any(b["type"] == "image" for b in blocks)


async def test_a_server_killed_mid_call_in_docker_fails_then_restarts(docker_desk, server: AnthropicServer,
                                                                      project: Path) -> None:
    wrapped = {"command": "sh", "args": ["-c", "echo $$ > /workspace/.mcp.pid; echo 'everything is starting' >&2; "
                                         "exec mcp-server-everything"]}
    desk = await docker_desk({"everything": wrapped})
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 30, "steps": 30})),
               lambda req: reply(tool_use("mcp__everything__echo", {"message": "again"})),
               lambda req: reply(text("fine")))
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("go"))
    await desk.wait_for(lambda e: getattr(e, "type", "") == "tool:update")
    pid = (project / ".mcp.pid").read_text().strip()
    await desk.rt.sandbox.exec(f"kill -9 {pid}")
    await turn
    first, second = await desk.records(session.session.id)
    assert first.state is ToolCallState.FAILED and "everything is starting" in first.error
    assert second.state is ToolCallState.COMPLETED


async def test_abort_and_group_mcp_ask_in_auto_in_docker(docker_desk, server: AnthropicServer) -> None:
    desk = await docker_desk({"everything": EVERYTHING}, mode="auto")
    desk.rt.policy.rules.append(__import__("desktop_app.core", fromlist=["Rule"]).Rule.parse("group:mcp", "ask"))
    server.add(reply(tool_use("mcp__everything__trigger-long-running-operation", {"duration": 60, "steps": 60})),
               lambda req: reply(text("stopped")))
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("go"))
    await desk.wait_for(lambda e: getattr(e, "type", "") == "tool:update")
    session.stop()
    await turn
    assert [a.provenance[0]["detail"] for a in desk.of("permission_required")] == ["group:mcp"]
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.FAILED and record.outcome.value == "interrupted"


async def test_a_granted_network_server_runs_in_a_companion(docker_desk, server: AnthropicServer, desk_env: Path,
                                                            project: Path, test_network: str) -> None:
    servers_ = {"net": {"command": "mcp-server-time", "run": "sandbox+network"}}
    desk = await docker_desk(servers_)
    assert desk.rt.mcp_servers()[0].state is McpServerState.NEEDS_APPROVAL
    await desk.rt.close()
    info = ProjectInfo(id="p", name="p", path=str(project))
    [consent] = consents(info, ConsentKind.MCP)
    approve(info, consent)  # the person's grant, in consent.json: bound to the entry as it is
    desk = await docker_desk(servers_)
    [info] = desk.rt.mcp_servers()
    assert info.state is McpServerState.READY, info.error
    server.add(reply(tool_use("mcp__net__get_current_time", {"timezone": "UTC"})), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("time")
    [record] = await desk.records(session.session.id)
    assert record.state is ToolCallState.COMPLETED
    assert record.sandbox["network"] == test_network and record.sandbox["relaxations"]
    assert record.sandbox["container_id"] != desk.rt.sandbox.describe().container_id
