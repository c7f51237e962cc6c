"""notebook_edit: replace, insert or delete one cell of a Jupyter notebook (nbformat 4), by id or index, under
the same rules as fs_edit: read before edit, the diff shown before a person decides, all through the sandbox."""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

from pydantic import Field, model_validator

from ..core import CallField, Risk, Sandbox, ToolContext, ToolInput, ToolResult, value_text
from ._common import BuiltinTool, Refusal, display_path, need_sandbox, workspace_path
from ._edits import (
    PlannedChange,
    check_read_hash,
    load,
    plan_off_loop,
    refusals_as_input_errors,
    shown_diff,
    write_planned,
)

_NB_TIMEOUT_S = 60.0


class NotebookEditInput(ToolInput):
    path: str = Field(description="The .ipynb file, relative to /workspace (or absolute under /workspace).")
    edit_mode: Literal["replace", "insert", "delete"] = Field(
        default="replace", description="replace a cell's source, insert a new cell, or delete a cell.")
    cell_id: str | None = Field(default=None, description="The cell's id (nbformat 4.5+). For insert: the new "
                                "cell goes after this one.")
    index: int | None = Field(default=None, ge=0, description="The cell's 0-based position, when it has no id. "
                              "For insert: the new cell's position (0 = first).")
    new_source: str = Field(default="", description="The cell's new source (replace, insert).")
    cell_type: Literal["code", "markdown", "raw"] | None = Field(
        default=None, description="The cell's type: required for insert; for replace it changes the type.")

    @model_validator(mode="after")
    def _one_target(self) -> NotebookEditInput:
        given = (self.cell_id is not None) + (self.index is not None)
        if given > 1 or (given == 0 and self.edit_mode != "insert"):
            raise ValueError("give exactly one of cell_id or index (insert with neither puts the cell first)")
        if self.edit_mode == "insert" and self.cell_type is None:
            raise ValueError("insert needs cell_type (code, markdown or raw)")
        return self


def _cells(nb: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or nb.get("nbformat", 0) < 4:
        raise Refusal(f"{where} is not a Jupyter notebook of format 4 (no 'cells' list)",
                      ["use fs_edit for other JSON files"])
    return nb["cells"]


def _position(cells: list[dict[str, Any]], args: NotebookEditInput, where: str) -> int:
    """The index the edit is about; for insert, where the new cell goes."""
    if args.cell_id is not None:
        for i, cell in enumerate(cells):
            if cell.get("id") == args.cell_id:
                return i + 1 if args.edit_mode == "insert" else i
        ids = ", ".join(str(c.get("id")) for c in cells[:20] if c.get("id"))
        raise Refusal(f"{where} has no cell with id {args.cell_id!r}",
                      [f"the cells' ids are: {ids}" if ids else "its cells have no ids: pass index instead",
                       "use fs_read on the notebook to see its cells"])
    index = args.index or 0
    last = len(cells) if args.edit_mode == "insert" else len(cells) - 1
    if index > last:
        raise Refusal(f"{where} has {len(cells)} cells; index {index} is past the end",
                      [f"pass an index from 0 to {last}"])
    return index


def _new_cell(args: NotebookEditInput, nb: dict[str, Any]) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": args.cell_type, "metadata": {}, "source": args.new_source}
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
        cell["id"] = secrets.token_hex(4)
    if args.cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def edited(nb: dict[str, Any], args: NotebookEditInput, where: str) -> tuple[dict[str, Any], str]:
    """The notebook after the edit, and one sentence saying what changed. A code cell whose source changes
    loses its outputs and execution count: they belonged to the old source."""
    cells = _cells(nb, where)
    i = _position(cells, args, where)
    if args.edit_mode == "insert":
        cell = _new_cell(args, nb)
        cells.insert(i, cell)
        return nb, f"Inserted a {args.cell_type} cell at index {i} of {where}"
    if args.edit_mode == "delete":
        gone = cells.pop(i)
        return nb, f"Deleted {gone.get('cell_type', 'the')} cell {gone.get('id', i)} (index {i}) of {where}"
    cell = cells[i]
    cell_type = args.cell_type or cell.get("cell_type", "code")
    cell.update(source=args.new_source, cell_type=cell_type)
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    else:
        cell.pop("execution_count", None)
        cell.pop("outputs", None)
    return nb, f"Replaced the source of {cell_type} cell {cell.get('id', i)} (index {i}) of {where}"


async def plan_notebook(
    sandbox: Sandbox, args: NotebookEditInput, ctx: ToolContext | None
) -> tuple[PlannedChange, str]:
    """The notebook's new text, planned against the file as it is now; with `ctx`, under read-before-edit."""
    path = workspace_path(args.path)
    where = display_path(path)
    before = await load(sandbox, path)
    if not before.exists:
        raise Refusal(f"{where}: file does not exist", ["use fs_write to create a new notebook"])
    if ctx is not None:
        check_read_hash(ctx, before)
    try:
        nb = json.loads(before.data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refusal(f"{where} is not valid notebook JSON ({exc})", ["use fs_read to see what it holds"]) from None
    nb, said = edited(nb, args, where)
    # Jupyter's own layout (one space, sorted keys, text as is), so an edit's diff is that cell's lines
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return await plan_off_loop(before, text), said


class NotebookEdit(BuiltinTool, name="notebook_edit", group="group:fs", input_model=NotebookEditInput,
                   read_only=False, timeout_s=_NB_TIMEOUT_S, risk=Risk.MEDIUM):
    label = "Edit notebook"
    description = (
        "Edit a Jupyter notebook (.ipynb): replace a cell's source, insert a new cell or delete one, by the "
        "cell's id or its 0-based index. The notebook must have been read with fs_read in this session and "
        "be unchanged since. A code cell whose source changes loses its outputs."
    )

    async def _run(self, args: NotebookEditInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        change, said = await plan_notebook(sandbox, args, ctx)
        await write_planned(sandbox, [change], ctx)
        return ToolResult.text(f"{said} (+{change.added} -{change.removed}).", **change.details())

    async def dry_run(self, args: NotebookEditInput, ctx: ToolContext) -> str | None:
        if ctx.sandbox is None:
            return None
        with refusals_as_input_errors():
            return shown_diff([(await plan_notebook(ctx.sandbox, args, ctx))[0]])

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        cell = f"id {raw['cell_id']}" if raw.get("cell_id") else f"index {raw.get('index', 0)}"
        fields = [CallField("Notebook", value_text(raw.get("path", "?")), "path"),
                  CallField("Action", f"{raw.get('edit_mode', 'replace')} the cell at {cell}")]
        if raw.get("edit_mode", "replace") != "delete":
            fields.append(CallField("Source", value_text(raw.get("new_source", "")), "code"))
        return tuple(fields)

    def summarize(self, raw: dict[str, Any]) -> str:
        target = f"cell {raw['cell_id']}" if raw.get("cell_id") else f"index {raw.get('index', 0)}"
        return f"notebook_edit {raw.get('path', '?')} ({raw.get('edit_mode', 'replace')} {target})"
