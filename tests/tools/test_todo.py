"""todo_read and todo_write: the session's todo list and its rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desktop_app.core import ToolContext
from desktop_app.tools import TODOS_KEY, TodoRead, TodoWrite

read, write = TodoRead(), TodoWrite()


async def run_tool(tool, ctx: ToolContext, raw: dict):
    return await tool.run(tool.parse(raw), ctx)


@pytest.fixture
def todo_ctx() -> ToolContext:
    # The todo tools need no sandbox at all.
    return ToolContext(call_id="c", session_id="s", sandbox=None)


async def test_write_then_read(todo_ctx):
    res = await run_tool(write, todo_ctx, {"todos": [
        {"id": "1", "content": "write tests", "status": "completed"},
        {"id": "2", "content": "fix bug", "status": "in_progress"},
        {"id": "3", "content": "ship", "status": "pending"},
    ]})
    assert not res.is_error
    assert res.details["counts"] == {"pending": 1, "in_progress": 1, "completed": 1}
    assert res.details["previous"] == []
    assert todo_ctx.state[TODOS_KEY][1] == {"id": "2", "content": "fix bug", "status": "in_progress"}

    got = await run_tool(read, todo_ctx, {})
    assert got.text_content.splitlines() == ["[x] 1: write tests", "[>] 2: fix bug", "[ ] 3: ship"]
    assert [t["id"] for t in got.details["todos"]] == ["1", "2", "3"]


async def test_write_replaces_the_list_and_reports_the_previous_one(todo_ctx):
    await run_tool(write, todo_ctx, {"todos": [{"id": "a", "content": "one", "status": "pending"}]})
    res = await run_tool(write, todo_ctx, {"todos": [{"id": "b", "content": "two", "status": "pending"}]})
    assert res.details["previous"] == [{"id": "a", "content": "one", "status": "pending"}]
    assert [t["id"] for t in todo_ctx.state[TODOS_KEY]] == ["b"]
    await run_tool(write, todo_ctx, {"todos": []})
    assert (await run_tool(read, todo_ctx, {})).text_content == "The todo list is empty."


async def test_read_of_a_fresh_session_is_empty(todo_ctx):
    res = await run_tool(read, todo_ctx, {})
    assert not res.is_error and res.details["todos"] == [] and "empty" in res.text_content


def test_at_most_one_in_progress():
    with pytest.raises(ValidationError) as info:
        write.parse({"todos": [
            {"id": "1", "content": "a", "status": "in_progress"},
            {"id": "2", "content": "b", "status": "in_progress"},
        ]})
    assert "at most one todo may be in_progress" in str(info.value)


def test_ids_unique_status_known_content_present():
    with pytest.raises(ValidationError, match="unique"):
        write.parse({"todos": [{"id": "1", "content": "a", "status": "pending"},
                               {"id": "1", "content": "b", "status": "pending"}]})
    with pytest.raises(ValidationError):
        write.parse({"todos": [{"id": "1", "content": "a", "status": "done"}]})
    with pytest.raises(ValidationError):
        write.parse({"todos": [{"id": "1", "content": "  ", "status": "pending"}]})
    with pytest.raises(ValidationError):
        write.parse({"todos": [{"id": "1", "content": "a", "status": "pending", "extra": 1}]})


def test_integer_ids_are_accepted_as_text():
    args = write.parse({"todos": [{"id": 7, "content": "a", "status": "pending"}]})
    assert args.todos[0].id == "7"


def test_flags():
    assert read.read_only and not write.read_only
    assert read.group == write.group == "group:todo"
    assert write.risk == "low"
