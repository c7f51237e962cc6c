"""What a file tool WOULD change, without writing: the diff the approval inbox shows before a person decides."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..core import AgentDeskError, Sandbox
from ._common import Refusal, workspace_path
from ._edits import EditSpec, load, plan_edits, plan_off_loop
from ._fs import FsEdit, FsEditInput, FsMultiEdit, FsMultiEditInput, FsWrite, FsWriteInput
from ._notebook import NotebookEdit, NotebookEditInput, plan_notebook


async def preview_diff(name: str, raw_input: dict[str, Any], sandbox: Sandbox) -> str | None:
    """The unified diff fs_write / fs_edit / fs_multi_edit / notebook_edit WOULD make, without writing (for the approval
    inbox). None for other tools, or when the input is invalid or the edit could not apply."""
    try:
        if name == FsWrite.name:
            w = FsWriteInput.model_validate(raw_input)
            before = await load(sandbox, workspace_path(w.path))
            return (await plan_off_loop(before, w.content)).diff
        if name == NotebookEdit.name:
            return (await plan_notebook(sandbox, NotebookEditInput.model_validate(raw_input), None))[0].diff
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
