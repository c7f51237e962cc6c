"""The session's todo list: todo_read and todo_write (kept in ctx.state, touches no files)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core import CallField, Risk, ToolContext, ToolInput, ToolResult, value_text
from ._common import TODOS_KEY, BuiltinTool

TodoStatus = Literal["pending", "in_progress", "completed"]
_MARK = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


class TodoItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="A short id, unique in the list.")
    content: str = Field(min_length=1, description="What to do, in a few words.")
    status: TodoStatus = Field(description="pending, in_progress or completed.")

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content is blank")
        return v


class TodoWriteInput(ToolInput):
    todos: list[TodoItem] = Field(max_length=100, description="The whole new list; it replaces the old one.")

    @model_validator(mode="after")
    def _rules(self) -> TodoWriteInput:
        dupes = sorted(i for i, n in Counter(t.id for t in self.todos).items() if n > 1)
        if dupes:
            raise ValueError(f"todo ids must be unique; repeated: {', '.join(dupes)}")
        doing = [t.id for t in self.todos if t.status == "in_progress"]
        if len(doing) > 1:
            raise ValueError(
                f"at most one todo may be in_progress, got {len(doing)} ({', '.join(doing)}); "
                "finish one (completed) or set the others back to pending"
            )
        return self


def _render(todos: list[dict[str, Any]]) -> str:
    if not todos:
        return "The todo list is empty."
    return "\n".join(f"{_MARK.get(t['status'], '[?]')} {t['id']}: {t['content']}" for t in todos)


def _counts(todos: list[dict[str, Any]]) -> dict[str, int]:
    c = Counter(t["status"] for t in todos)
    return {s: c.get(s, 0) for s in ("pending", "in_progress", "completed")}


class TodoRead(BuiltinTool, name="todo_read", group="group:todo", input_model=ToolInput, read_only=True,
               timeout_s=5.0, risk=Risk.LOW):
    label = "Read todo list"
    description = "Read this session's todo list: each item's id, content and status."

    async def _run(self, args: ToolInput, ctx: ToolContext) -> ToolResult:
        todos = [dict(t) for t in ctx.state.get(TODOS_KEY, [])]
        return ToolResult.text(_render(todos), todos=todos, counts=_counts(todos))

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return ()

    def summarize(self, raw: dict[str, Any]) -> str:
        return "todo_read"


# Not read-only: it changes session state, though nothing outside the session.
class TodoWrite(BuiltinTool, name="todo_write", group="group:todo", input_model=TodoWriteInput, read_only=False,
                timeout_s=5.0, risk=Risk.LOW):
    label = "Update todo list"
    description = (
        "Replace this session's todo list (send the whole list). Use it to plan multi-step work and show "
        "progress: status is pending, in_progress or completed, with at most one item in_progress at a time; "
        "mark an item completed as soon as it is done. Touches no files."
    )

    async def _run(self, args: TodoWriteInput, ctx: ToolContext) -> ToolResult:
        previous = [dict(t) for t in ctx.state.get(TODOS_KEY, [])]
        todos = [t.model_dump() for t in args.todos]
        ctx.state[TODOS_KEY] = todos
        counts = _counts(todos)
        ctx.todos_changed(todos, counts)
        head = (f"Todo list updated: {len(todos)} items ({counts['completed']} completed, "
                f"{counts['in_progress']} in progress, {counts['pending']} pending).")
        return ToolResult.text(
            head + "\n" + _render(todos), todos=[dict(t) for t in todos], previous=previous, counts=counts
        )

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        todos = [t for t in raw.get("todos") or [] if isinstance(t, dict)] if isinstance(raw.get("todos"), list) else []
        counts = Counter(str(t.get("status", "?")) for t in todos)
        listed = "\n".join(f"[{t.get('status', '?')}] {t.get('content', '')}" for t in todos)
        return (CallField("Items", f"{len(todos)}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                          if todos else "none"), CallField("List", value_text(listed)))

    def summarize(self, raw: dict[str, Any]) -> str:
        todos = raw.get("todos")
        if not isinstance(todos, list):
            return "todo_write"
        st = Counter(t.get("status") for t in todos if isinstance(t, dict))
        return (f"todo_write: {len(todos)} todos ({st.get('completed', 0)} done, "
                f"{st.get('in_progress', 0)} in progress)")
