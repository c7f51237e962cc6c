"""Planning file changes in memory: exact-match edits, read-hash checks, and the diffs they make."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import (
    WORKSPACE,
    Sandbox,
    ToolContext,
    ToolInputError,
    container_path,
    control_dir,
    control_reason,
)
from ._common import (
    Refusal,
    diff_counts,
    display_path,
    forget_host_change,
    read_all,
    read_hashes,
    sha256,
    unified_diff,
    workspace_path,
)


@dataclass(slots=True)
class FileState:
    """A file as it is now in the sandbox (or absent)."""

    path: str  # absolute, under /workspace
    exists: bool
    data: bytes = b""

    @property
    def display(self) -> str:
        return display_path(self.path)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(slots=True)
class PlannedChange:
    """The new contents one file will get, and the diff for the UI."""

    before: FileState
    new_text: str
    diff: str
    added: int
    removed: int
    new_data: bytes = b""  # new_text in UTF-8, encoded once (written, hashed, counted)

    @property
    def path(self) -> str:
        return self.before.path

    @property
    def display(self) -> str:
        return self.before.display

    def details(self) -> dict[str, Any]:
        d = {
            "path": self.display,
            "diff": self.diff,
            "added": self.added,
            "removed": self.removed,
            "created": not self.before.exists,
        }
        if not self.diff and self.new_data != self.before.data:
            d["diff_omitted"] = f"files over {MAX_DIFF_CHARS:,} characters are not diffed"
        return d


INLINE_DIFF_CHARS = 65_536  # a larger change is planned on a worker thread: difflib is pure Python
MAX_DIFF_CHARS = 2_000_000  # past this, no line diff: it costs seconds, and the record keeps it whole


def plan(before: FileState, new_text: str) -> PlannedChange:
    old = before.text if before.exists else ""
    data = new_text.encode("utf-8")
    if len(old) + len(new_text) > MAX_DIFF_CHARS:
        # the line counts of the two sides stand in for the diff's
        return PlannedChange(before, new_text, "", line_count(new_text), line_count(old), data)
    diff = unified_diff(before.display, old, new_text, created=not before.exists)
    added, removed = diff_counts(diff)
    return PlannedChange(before, new_text, diff, added, removed, data)


def line_count(text: str) -> int:
    """The lines of `text` as an editor counts them, without splitting it (a summary is taken on the loop)."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


async def plan_off_loop(before: FileState, new_text: str) -> PlannedChange:
    """`plan`, on a worker thread when the texts are large (a 20 MB write's diff took a second)."""
    if len(new_text) + (len(before.data) if before.exists else 0) <= INLINE_DIFF_CHARS:
        return plan(before, new_text)
    return await asyncio.to_thread(plan, before, new_text)


async def refuse_control(sandbox: Sandbox, path: str) -> None:
    """A path in a control folder (`.agent-desk`, `.git`) is never written, as written or as the sandbox
    resolves it (`src/cfg -> ../.agent-desk/rules.toml`), in every mode. Reads stay allowed."""
    for spelled in (path, container_path(await sandbox.real_path(path))):
        control = control_dir(spelled)
        if control is not None:
            raise Refusal(
                control_reason(display_path(spelled), control),
                [f"leave {control}/ as it is; the person changes it from the desk's settings or a terminal"],
                path=display_path(path),
            )


async def load(sandbox: Sandbox, path: str) -> FileState:
    await refuse_control(sandbox, path)
    st = await sandbox.stat(path)
    if st is None:
        return FileState(path, exists=False)
    if st.type == "dir":
        raise Refusal(
            f"{display_path(path)} is a directory, not a file",
            ["use fs_glob to list files in it", "pass the path of a file inside it"],
        )
    if st.type not in ("file", "symlink"):
        raise Refusal(f"{display_path(path)} is not a regular file ({st.type})")
    return FileState(path, exists=True, data=await read_all(sandbox, path, st.size))


def check_read_hash(ctx: ToolContext, state: FileState) -> None:
    """An existing file may only change if the model read its current contents in this session."""
    if not state.exists:
        return
    if state.path in ctx.host_changed:
        raise Refusal(
            f"{state.display} changed on the host (the person's editor or another program) since you last read "
            "it; read it again before changing it",
            [f"use fs_read on {state.display} again, then redo the change against what is there now"],
            path=state.display,
        )
    seen = read_hashes(ctx).get(state.path)
    if seen is None:
        raise Refusal(
            f"{state.display} exists but has not been read in this session; read it again before changing it",
            [f"use fs_read on {state.display} first, then retry with its current contents in mind"],
            path=state.display,
        )
    if seen != sha256(state.data):
        raise Refusal(
            f"{state.display} changed since you last read it (by a command, the user or another tool); "
            "read it again before changing it",
            [f"use fs_read on {state.display} again, then redo the change against what is there now"],
            path=state.display,
        )


def apply_edit(text: str, old: str, new: str, replace_all: bool, where: str) -> str:
    """Exact-match replacement; a CRLF file also accepts old/new written with plain newlines."""
    if old == "":
        raise Refusal(
            f"{where}: old_string is empty",
            ["to create or overwrite a whole file use fs_write", "give the exact text to replace"],
        )
    if old == new:
        raise Refusal(f"{where}: old_string and new_string are the same; nothing would change",
                      ["pass the text you want in new_string"])
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise Refusal(
            f"{where}: old_string was not found (0 matches)",
            [
                "use fs_read to see the current text and copy it exactly, including indentation",
                "do not include the line-number prefix that fs_read shows",
            ],
        )
    if count > 1 and not replace_all:
        raise Refusal(
            f"{where}: old_string matches {count} times",
            ["pass replace_all=true to change every match, or include more context to make it unique"],
        )
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


@dataclass(slots=True)
class EditSpec:
    path: str
    old_string: str
    new_string: str
    replace_all: bool = False


async def plan_edits(
    sandbox: Sandbox, edits: Sequence[EditSpec], ctx: ToolContext | None, *, multi: bool
) -> list[PlannedChange]:
    """Every edit applied in memory, in order (edits to one file chain); raise Refusal on the first failure.

    With `ctx` the read-hash rule is enforced; without it (an approval preview) it is not.
    """
    states: dict[str, FileState] = {}
    texts: dict[str, str] = {}
    order: list[str] = []
    for i, edit in enumerate(edits):
        path = workspace_path(edit.path)
        where = f"edit {i + 1} ({display_path(path)})" if multi else display_path(path)
        if path not in states:
            state = await load(sandbox, path)
            if not state.exists:
                raise Refusal(
                    f"{where}: file does not exist",
                    ["use fs_write to create a new file", "use fs_glob to find the right path"],
                )
            if ctx is not None:
                check_read_hash(ctx, state)
            try:
                texts[path] = state.data.decode("utf-8")
            except UnicodeDecodeError:
                raise Refusal(
                    f"{where}: file is not UTF-8 text; editing it would corrupt it",
                    ["use bash_run (sed, python) to change binary or non-UTF-8 files"],
                ) from None
            states[path] = state
            order.append(path)
        texts[path] = apply_edit(texts[path], edit.old_string, edit.new_string, edit.replace_all, where)
    return [await plan_off_loop(states[p], texts[p]) for p in order]


async def _digest(data: bytes) -> str:
    """sha256 releases the GIL, but the loop would still wait for it: large data is hashed on a thread."""
    return sha256(data) if len(data) <= INLINE_DIFF_CHARS else await asyncio.to_thread(sha256, data)


async def write_planned(sandbox: Sandbox, changes: Sequence[PlannedChange], ctx: ToolContext) -> None:
    """Write every change; if one write fails, put back the files already written (all or none)."""
    for change in changes:  # again just before writing: a link may have been planted since the plan
        await refuse_control(sandbox, change.path)
    written: list[PlannedChange] = []
    try:
        for change in changes:
            await sandbox.write_file(change.path, change.new_data)
            written.append(change)
    except BaseException:
        for change in reversed(written):
            try:
                await sandbox.write_file(change.path, change.before.data)
            except Exception:  # best effort: the original error is what matters
                pass
        raise
    hashes = read_hashes(ctx)
    for change in changes:
        hashes[change.path] = await _digest(change.new_data)
        forget_host_change(ctx, change.path)


async def plan_write(sandbox: Sandbox, path: str, content: str, ctx: ToolContext) -> PlannedChange:
    """fs_write's change, planned against the file as it is now, under the read-before-edit rule."""
    path = workspace_path(path)
    if path == WORKSPACE:
        raise Refusal("the workspace root is a directory, not a file", ["pass a file path"])
    before = await load(sandbox, path)
    check_read_hash(ctx, before)
    return await plan_off_loop(before, content)


@contextlib.contextmanager
def refusals_as_input_errors() -> Iterator[None]:
    """A tool's Refusal during a dry run is the executor's ToolInputError: the call fails before anyone
    is asked, with the refusal's words and recommendations."""
    try:
        yield
    except Refusal as r:
        raise ToolInputError(r.error, hint="; ".join(r.recommendations)) from None


def shown_diff(changes: Sequence[PlannedChange]) -> str:
    """The diff a person approves; a change too large to diff says so instead of looking empty."""
    parts = []
    for c in changes:
        omitted = c.details().get("diff_omitted")
        parts.append(c.diff or (f"{c.display}: +{c.added} -{c.removed} lines ({omitted})\n" if omitted else ""))
    return "".join(parts)


async def dry_run_write(ctx: ToolContext, path: str, content: str) -> str | None:
    """The diff fs_write would make, or ToolInputError when it would be refused; None without a sandbox."""
    if ctx.sandbox is None:
        return None
    with refusals_as_input_errors():
        return shown_diff([await plan_write(ctx.sandbox, path, content, ctx)])


async def dry_run_edits(ctx: ToolContext, edits: Sequence[EditSpec], *, multi: bool) -> str | None:
    """The diff fs_edit / fs_multi_edit would make against the files as they are now (read-before-edit,
    old_string missing or ambiguous), or ToolInputError when it would fail; None without a sandbox."""
    if ctx.sandbox is None:
        return None
    with refusals_as_input_errors():
        return shown_diff(await plan_edits(ctx.sandbox, edits, ctx, multi=multi))
