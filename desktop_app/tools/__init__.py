"""Built-in tools (fs_*, bash_*, todo_*), written against the Sandbox protocol only."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..core import AgentDeskError, Sandbox, Tool
from ._bash import BashKill, BashLogs, BashRun, BashRunInput, ProcessInput
from ._common import READ_HASHES_KEY, TODOS_KEY, Refusal, workspace_path
from ._edits import EditSpec, load, plan, plan_edits
from ._fs import (
    EditItem,
    FsEdit,
    FsEditInput,
    FsGlob,
    FsGlobInput,
    FsGrep,
    FsGrepInput,
    FsMultiEdit,
    FsMultiEditInput,
    FsRead,
    FsReadInput,
    FsWrite,
    FsWriteInput,
)
from ._todo import TodoItem, TodoRead, TodoWrite, TodoWriteInput

__all__ = [
    "BUILTIN_TOOLS",
    "READ_HASHES_KEY",
    "TODOS_KEY",
    "BashKill",
    "BashLogs",
    "BashRun",
    "BashRunInput",
    "EditItem",
    "FsEdit",
    "FsEditInput",
    "FsGlob",
    "FsGlobInput",
    "FsGrep",
    "FsGrepInput",
    "FsMultiEdit",
    "FsMultiEditInput",
    "FsRead",
    "FsReadInput",
    "FsWrite",
    "FsWriteInput",
    "ProcessInput",
    "TodoItem",
    "TodoRead",
    "TodoWrite",
    "TodoWriteInput",
    "builtin_tools",
    "preview_diff",
]

BUILTIN_TOOLS: list[Tool] = [
    FsRead(),
    FsWrite(),
    FsEdit(),
    FsMultiEdit(),
    FsGlob(),
    FsGrep(),
    BashRun(),
    BashLogs(),
    BashKill(),
    TodoRead(),
    TodoWrite(),
]


def builtin_tools() -> list[Tool]:
    """The built-in tools, in the order they are offered to the model."""
    return list(BUILTIN_TOOLS)


async def preview_diff(name: str, raw_input: dict[str, Any], sandbox: Sandbox) -> str | None:
    """The unified diff fs_write / fs_edit / fs_multi_edit WOULD make, without writing (for the approval
    inbox). None for other tools, or when the input is invalid or the edit could not apply."""
    try:
        if name == FsWrite.name:
            w = FsWriteInput.model_validate(raw_input)
            before = await load(sandbox, workspace_path(w.path))
            return plan(before, w.content).diff
        if name == FsEdit.name:
            e = FsEditInput.model_validate(raw_input)
            specs = [EditSpec(e.path, e.old_string, e.new_string, e.replace_all)]
        elif name == FsMultiEdit.name:
            m = FsMultiEditInput.model_validate(raw_input)
            specs = [EditSpec(x.path, x.old_string, x.new_string, x.replace_all) for x in m.edits]
        else:
            return None
        changes = await plan_edits(sandbox, specs, None, multi=name == FsMultiEdit.name)
        return "".join(c.diff for c in changes)
    except (ValidationError, Refusal, AgentDeskError):
        return None
