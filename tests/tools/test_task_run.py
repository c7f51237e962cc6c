"""task_run end to end: a runtime on a real DockerSandbox, a SQLite audit file and the fake Anthropic server.
The parent and its child share one sandbox, one executor (one inbox) and one audit; the child's session is
linked to the parent's call, its approvals are labelled with its name, and its answer is the call's result."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop_app.core import Deny, ToolCallState
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import system_of

pytestmark = pytest.mark.docker


async def test_a_denied_child_call_its_note_and_the_childs_answer(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for()
    desk.answer = lambda ev: Deny(note="do not touch the tree, just report")
    server.add(
        reply(tool_use("task_run", {"task": "Create x.txt", "template": "coding", "name": "builder"})),
        reply(tool_use("bash_run", {"command": "touch x.txt"})),  # the child's step: it asks, and is denied
        lambda req: reply(text(f"I was told: {req.last_tool_result_text()}")),  # the child's answer
        lambda req: reply(text("done")),  # the parent, with the child's answer as the result
    )
    session = await desk.rt.open_session()
    result = await session.send("go")
    assert result.ok
    (parent_call,) = await desk.records(session.session.id)
    assert parent_call.name == "task_run" and parent_call.state is ToolCallState.COMPLETED
    child_id = parent_call.result["details"]["child_session_id"]
    child = await desk.rt.store.get_session(child_id)
    assert child.meta["parent_session_id"] == session.session.id
    assert child.meta["parent_call_id"] == parent_call.id and child.meta["template"] == "coding"
    (child_call,) = await desk.records(child_id)
    assert child_call.name == "bash_run" and child_call.state is ToolCallState.DENIED
    # the inbox saw the child's approval, marked with its name and its parent call
    (asked,) = desk.of("permission_required")
    assert asked.session_id == child_id
    # named by the desk (template and number), not by the name the model gave it
    assert asked.meta["subagent"] == "coding 1" and asked.meta["parent_call_id"] == parent_call.id
    assert asked.meta["task"] == "Create x.txt" and child.meta["name_given"] == "builder"
    # the note reached the child; the child's answer reached the parent
    assert "do not touch the tree, just report" in server.requests[2].last_tool_result_text()
    assert "I was told:" in server.requests[3].last_tool_result_text()
    assert "do not touch the tree" in server.requests[3].last_tool_result_text()
    assert "sub-agent 'coding 1'" in system_of(server.requests[1])
    assert not (Path(desk.rt.project.path) / "x.txt").exists()
    started = desk.of("subagent:started")
    assert [(e.call_id, e.child_session_id, e.name) for e in started] == [(parent_call.id, child_id, "coding 1")]


async def test_explore_reads_in_the_same_sandbox_and_may_not_write(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for(mode="auto")  # the parent may write unasked: its explore child still may not
    server.add(
        reply(tool_use("task_run", {"task": "What is the answer?"})),
        reply(tool_use("fs_read", {"path": "notes.txt"}), tool_use("fs_write", {"path": "y.txt", "content": "x"}),
              tool_use("bash_run", {"command": "echo hi > z.txt"})),
        lambda req: reply(text("42")),
        lambda req: reply(text("the child says 42")),
    )
    session = await desk.rt.open_session()
    await session.send("go")
    (parent_call,) = await desk.records(session.session.id)
    child_id = parent_call.result["details"]["child_session_id"]
    read, write, bash = await desk.records(child_id)
    assert read.state is ToolCallState.COMPLETED and "the answer is 42" in str(read.result)
    # fs_write and bash_run are not offered to explore: refused before the policy, and recorded
    assert write.state is ToolCallState.DENIED and "not available to explore 1" in write.error
    assert bash.state is ToolCallState.DENIED and "template explore" in bash.error
    offered = {t["name"] for t in server.requests[1].body["tools"]}
    assert {"fs_read", "fs_grep", "fs_glob"} <= offered and not offered & {"fs_write", "bash_run", "fs_edit"}
    assert not (Path(desk.rt.project.path) / "y.txt").exists() and not (Path(desk.rt.project.path) / "z.txt").exists()
    assert parent_call.result["content"][0]["text"] == "42"
    assert not desk.of("permission_required")


async def test_depth_and_number_bounds(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for(subagent_max_depth=1, subagent_max_children=1)
    server.add(
        reply(tool_use("task_run", {"task": "one"}), tool_use("task_run", {"task": "two"})),
        lambda req: reply(tool_use("task_run", {"task": "deeper"})),  # depth 1 may not start children
        lambda req: reply(text("child done")),
        lambda req: reply(text("parent done")),
    )
    session = await desk.rt.open_session()
    await session.send("go")
    first, second = await desk.records(session.session.id)
    assert first.state is ToolCallState.COMPLETED
    assert second.state is ToolCallState.FAILED and "started its 1 sub-agents already" in second.error
    (deeper,) = await desk.records(first.result["details"]["child_session_id"])
    assert deeper.state is ToolCallState.DENIED and "not available" in deeper.error  # not even offered
    assert "task_run" not in {t["name"] for t in server.requests[1].body["tools"]}


async def test_stop_reaches_a_child_waiting_for_approval(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for()
    desk.answer = lambda ev: None  # nobody answers
    server.add(
        reply(tool_use("task_run", {"task": "write", "template": "coding"})),
        reply(tool_use("bash_run", {"command": "touch w.txt"})),
        lambda req: reply(text("child stopped")),
        lambda req: reply(text("parent after stop")),
    )
    session = await desk.rt.open_session()
    turn = asyncio.ensure_future(session.send("go"))
    asked = await desk.wait_for(lambda e: getattr(e, "type", "") == "permission_required")
    session.stop()
    result = await asyncio.wait_for(turn, 60)
    assert result.reason.value == "interrupted"
    await desk.wait_for(lambda e: getattr(e, "type", "") == "state_changed" and e.call_id == asked.call_id
                        and e.state == "FAILED")
    (child_call,) = await desk.records(asked.session_id)
    assert child_call.state is ToolCallState.FAILED and "interrupted" in child_call.error
    (parent_call,) = await desk.records(session.session.id)
    assert parent_call.state is ToolCallState.FAILED and parent_call.outcome.value == "interrupted"
    assert not desk.rt.executor.pending()
    assert not (Path(desk.rt.project.path) / "w.txt").exists()


async def test_a_project_template_picked_for_the_project(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for(settings={"template": "explore"})
    server.add(reply(tool_use("fs_write", {"path": "p.txt", "content": "x"})), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("go")
    (call,) = await desk.records(session.session.id)
    assert call.state is ToolCallState.DENIED and "template explore" in call.error
    assert "You are an explorer" in system_of(server.requests[0])
