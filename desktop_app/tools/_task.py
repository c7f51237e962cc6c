"""task_run: the model hands a task to a sub-agent made from a template (core/_subagents.py), and gets the
sub-agent's final answer back as the result."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..core import TASK_TOOL, CallField, ToolContext, ToolInput, ToolInputError, ToolResult, value_text
from ._common import BuiltinTool

TASK_TIMEOUT_S = 3600.0  # a sub-agent may wait on people; stop reaches it sooner


class TaskRunInput(ToolInput):
    task: str = Field(min_length=1, max_length=20_000,
                      description="The whole task: the sub-agent sees nothing of this conversation but this.")
    template: str = Field("explore", description='The sub-agent\'s template: "explore" (read-only search, the '
                          'default), "read-only review", "coding", or one the project defines.')
    name: str = Field("", max_length=40, description="A short name for the sub-agent, kept in its record; the "
                      "person sees the desk's label (its template and number).")


class TaskRun(BuiltinTool, name=TASK_TOOL, group="group:agents", input_model=TaskRunInput, read_only=True,
              timeout_s=TASK_TIMEOUT_S):
    # read_only: task_run itself changes nothing; every call the sub-agent makes is judged on its own,
    # under a policy never wider than this session's.
    label = "Start a sub-agent"
    description = (
        "Hand a self-contained task to a sub-agent with its own context, in the same sandbox, and get its "
        "final answer. Use it for searches and reviews that would fill your context (template explore or "
        "read-only review). The sub-agent's permissions are never wider than yours."
    )

    async def validate(self, args: Any, ctx: ToolContext) -> None:
        _subagents(ctx).check(args.template)  # a bound or an unknown template fails at once, nobody asked

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Task", value_text(raw.get("task", ""))),
                  CallField("Template", value_text(raw.get("template") or "explore"))]
        if raw.get("name"):
            fields.append(CallField("Name", value_text(raw["name"])))
        return tuple(fields)

    async def _run(self, args: Any, ctx: ToolContext) -> ToolResult:
        answer = await _subagents(ctx).run(template=args.template, task=args.task, name=args.name,
                                           parent_call_id=ctx.call_id)
        details = {"child_session_id": answer.session_id, "subagent": answer.name, "template": answer.template,
                   "steps": answer.steps, "reason": answer.reason}
        if answer.ok:
            return ToolResult.text(answer.text or "(the sub-agent gave no answer)", **details)
        partial = f" Its last words: {answer.text}" if answer.text else ""
        return ToolResult.error(f"the sub-agent {answer.name!r} did not finish ({answer.reason}): "
                                f"{answer.message}{partial}", **details)


def _subagents(ctx: ToolContext) -> Any:
    found = ctx.subagents
    if found is None:
        raise ToolInputError("this session cannot start sub-agents", hint="Do the task yourself.")
    return found
