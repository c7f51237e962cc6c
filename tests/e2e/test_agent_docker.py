"""The whole loop for real: the anthropic client over HTTP to the fake server, the executor, the
built-in tools in a Docker sandbox, and a SQLite audit store."""

from __future__ import annotations

import asyncio
import json

import pytest

from desktop_app.core import Deny, ToolCallState
from desktop_app.store import AuditQuery
from tests.fakes.anthropic_server import reply, text, tool_use

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


async def _record(runtime, tool_use_id: str):
    """The one call that carries the model's id (records are keyed by the desk's own id)."""
    [row] = await runtime.store.list_records(AuditQuery(tool_use_id=tool_use_id))
    return await runtime.store.get_record(row.id)


async def test_read_edit_and_run_tests_in_the_container(docker_runtime, server, workspace_dir) -> None:
    server.add(
        reply(text("Let me read it."), tool_use("fs_read", {"path": "greet.txt"}, id="toolu_read")),
        # a malformed input and an unknown tool: both reach the model as errors, the turn goes on
        reply(tool_use("fs_edit", raw_json='{"path": "greet.txt", "old_', id="toolu_bad"),
              tool_use("fs_nope", {"path": "greet.txt"}, id="toolu_unknown")),
        reply(tool_use("fs_edit", {"path": "greet.txt", "old_string": "hello world",
                                   "new_string": "hello agent"}, id="toolu_edit")),
        reply(tool_use("bash_run", {"command": "sh test.sh"}, id="toolu_test")),
        lambda req: reply(text(f"Tests: {req.last_tool_result_text()}")),
    )
    runtime = await docker_runtime("auto")
    session = await runtime.open_session(title="e2e")
    result = await session.send("change the greeting and run the tests")
    assert result.reason == "end_turn", result
    assert "PASS" in result.text
    assert (workspace_dir / "greet.txt").read_text() == "hello agent\n"
    assert "hello world" in server.requests[1].last_tool_result_text()
    bad, unknown = server.requests[2].tool_results()
    assert bad["is_error"] and "not valid JSON" in bad["content"][0]["text"]
    assert unknown["is_error"] and "unknown tool" in unknown["content"][0]["text"]
    rec = await _record(runtime, "toolu_test")
    assert rec.state is ToolCallState.COMPLETED and rec.sandbox["kind"] == "docker"
    # prompt caching on every request, and the system prompt names the image
    for req in server.requests:
        assert req.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert req.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert req.body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "agent-desk/minimal" in server.requests[0].body["system"][0]["text"]
    assert (await runtime.store.verify()).ok


async def test_a_denied_call_note_reaches_the_model(docker_runtime, server, workspace_dir) -> None:
    server.add(
        reply(tool_use("bash_run", {"command": "rm greet.txt"}, id="toolu_rm")),
        lambda req: reply(text(f"Understood: {req.last_tool_result_text()}")),
    )
    runtime = await docker_runtime("ask")
    asked = asyncio.Event()
    asked_for: list[str] = []
    runtime.bus.on("permission_required", lambda env: (asked_for.append(env.payload["call_id"]), asked.set()))
    session = await runtime.open_session()
    turn = asyncio.ensure_future(session.send("clean up"))
    await asyncio.wait_for(asked.wait(), 30)
    runtime.executor.decide(asked_for[0], Deny(note="keep greet.txt, it is the fixture"))
    result = await turn
    assert "keep greet.txt, it is the fixture" in result.text
    assert (workspace_dir / "greet.txt").exists()
    rec = await _record(runtime, "toolu_rm")
    assert rec.state is ToolCallState.DENIED and rec.id == asked_for[0]


async def test_a_call_that_times_out(docker_runtime, server) -> None:
    server.add(
        reply(tool_use("bash_run", {"command": "sleep 30", "timeout_ms": 500}, id="toolu_slow")),
        lambda req: reply(text(req.last_tool_result_text())),
    )
    runtime = await docker_runtime("auto")
    session = await runtime.open_session()
    result = await session.send("wait")
    assert result.reason == "end_turn"
    rec = await _record(runtime, "toolu_slow")
    assert rec.is_error
    assert "timed out" in result.text.lower() or "timeout" in result.text.lower()
    body = server.requests[1].tool_results()[0]
    assert body.get("is_error") is True
    assert json.dumps(body)  # serialisable as sent
