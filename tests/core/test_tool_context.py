"""The running tool's context (core/_tool_context.py): the todo list published by the tool itself, custom
events capped per call, streamed output flushed once the tool ends, the session's shared fields."""

from __future__ import annotations

from desktop_app.core import EventBus, RunContext, TodoChanged, ToolCall, ToolCallRecord, ToolContext
from desktop_app.core._approvals import Batch
from desktop_app.core._redaction import DEFAULT_REDACTOR
from desktop_app.core._run import CallJob
from desktop_app.core._tool_context import MAX_CUSTOM_EVENTS, flush_updates, tool_context
from desktop_app.tools import TodoWrite


def _job(tool=None) -> tuple[CallJob, EventBus, list]:
    bus = EventBus()
    events: list = []
    bus.on("*", events.append)
    run = RunContext(session_id="s1", project_id="p1")
    record = ToolCallRecord(tool_use_id="toolu_1", name="todo_write", input={}, session_id="s1", project_id="p1")
    return CallJob(record, ToolCall("toolu_1", "todo_write", {}), run, Batch(), tool or TodoWrite()), bus, events


def test_todos_changed_publishes_the_list_with_the_calls_ids() -> None:
    published: list = []
    ctx = ToolContext(call_id="c1", session_id="s1", sandbox=None, _publish=published.append)
    ctx.todos_changed([{"id": "1", "content": "x", "status": "pending"}], {"pending": 1})
    [event] = published
    assert isinstance(event, TodoChanged)
    assert (event.session_id, event.call_id, event.counts) == ("s1", "c1", {"pending": 1})


async def test_todo_write_publishes_todo_changed_through_its_context() -> None:
    job, bus, events = _job()
    ctx = tool_context(job, bus, DEFAULT_REDACTOR, person=None)
    tool = TodoWrite()
    todos = [{"id": "a", "content": "plan", "status": "in_progress"}]
    await tool.run(tool.parse({"todos": todos}), ctx)
    [changed] = [e.payload for e in events if e.type == "todo_changed"]
    assert changed["todos"] == todos and changed["counts"]["in_progress"] == 1
    assert changed["call_id"] == job.record.id


def test_the_context_shares_the_sessions_fields() -> None:
    job, bus, _ = _job()
    ctx = tool_context(job, bus, DEFAULT_REDACTOR, person=None)
    assert ctx.state is job.run.state and ctx.host_changed is job.run.host_changed
    ctx.host_changed.add("/workspace/a")
    assert job.run.host_changed == {"/workspace/a"}


def test_custom_events_are_capped_and_the_drop_said_once() -> None:
    job, bus, events = _job()
    ctx = tool_context(job, bus, DEFAULT_REDACTOR, person=None)
    for i in range(MAX_CUSTOM_EVENTS + 5):
        ctx.emit("tick", {"i": i})
    custom = [e.payload for e in events if e.type == "tool:custom"]
    assert len(custom) == MAX_CUSTOM_EVENTS + 1
    assert custom[-1]["name"] == "dropped"


def test_what_a_stream_holds_is_flushed_when_the_tool_ends() -> None:
    job, bus, events = _job()
    ctx = tool_context(job, bus, DEFAULT_REDACTOR, person=None)
    ctx.update("line one\nline t", "stdout")
    flush_updates(job, bus)
    text = "".join(e.payload["text"] for e in events if e.type == "tool:update")
    assert text == "line one\nline t"
