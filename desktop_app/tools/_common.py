"""What the built-in tools share: workspace path checks, refusals with recommendations, hashes, diffs."""

from __future__ import annotations

import difflib
import hashlib
import posixpath
from typing import Any

from pydantic import BaseModel

from ..core import (
    WORKSPACE,
    PathOutsideWorkspace,
    Risk,
    Sandbox,
    SandboxError,
    Tool,
    ToolContext,
    ToolInput,
    ToolResult,
    container_path,
)

READ_HASHES_KEY = "fs_read_hashes"
TODOS_KEY = "todos"
# Files larger than this are never loaded whole (the read hash needs the full bytes).
MAX_FILE_BYTES = 32 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024


class Refusal(Exception):
    """A tool refused the call; becomes a ToolResult.error with recommendations."""

    def __init__(self, error: str, recommendations: list[str] | None = None, **details: Any) -> None:
        super().__init__(error)
        self.error = error
        self.recommendations = recommendations or []
        self.details = details

    def result(self) -> ToolResult:
        return ToolResult.error(self.error, self.recommendations, **self.details)


def workspace_path(path: str) -> str:
    """Normalize `path` to an absolute path under /workspace with core's one normalisation (the policy
    judges the same path), refusing obvious escapes before the sandbox is asked (the sandbox still
    resolves symlinks in its own view). Nothing is stripped."""
    if not isinstance(path, str) or not path.strip():
        raise Refusal("path is empty", [f"pass a path relative to {WORKSPACE}, e.g. src/app.py"])
    if "\x00" in path:
        raise Refusal("path contains a NUL byte", [f"pass a plain path relative to {WORKSPACE}"])
    if path.startswith("~"):
        raise Refusal(
            f"{path!r}: '~' is not expanded; paths are relative to {WORKSPACE}",
            [f"pass a path relative to {WORKSPACE}, e.g. src/app.py"],
        )
    norm = container_path(path)
    if norm != WORKSPACE and not norm.startswith(WORKSPACE + "/"):
        raise Refusal(
            f"{path!r} resolves to {norm}, outside the workspace {WORKSPACE}",
            [f"only files under {WORKSPACE} can be used; pass a path relative to it"],
            path=path,
        )
    return norm


def display_path(abs_path: str) -> str:
    """The workspace-relative form shown to people and used in diff headers."""
    rel = posixpath.relpath(abs_path, WORKSPACE)
    return "." if rel == "." else rel


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_hashes(ctx: ToolContext) -> dict[str, str]:
    return ctx.state.setdefault(READ_HASHES_KEY, {})


def forget_host_change(ctx: ToolContext, path: str) -> None:
    """The tool has just read or written `path`: a change on the host before that is known now."""
    ctx.host_changed.discard(path)


def need_sandbox(ctx: ToolContext) -> Sandbox:
    if ctx.sandbox is None:
        raise Refusal(
            "no sandbox is attached to this session",
            ["start the project's sandbox (Docker, or the local fallback) and retry"],
        )
    return ctx.sandbox


async def read_all(sandbox: Sandbox, path: str, size: int) -> bytes:
    """The whole file, in chunks (a sandbox may cap one read)."""
    if size > MAX_FILE_BYTES:
        raise Refusal(
            f"{display_path(path)} is {size} bytes, more than the {MAX_FILE_BYTES} bytes a file tool loads",
            ["use bash_run with head, tail, sed -n or grep to look at parts of it",
             "use fs_grep to search it"],
        )
    buf = bytearray()
    while True:
        chunk = await sandbox.read_file(path, offset=len(buf), limit=_CHUNK)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_FILE_BYTES:
            raise Refusal(f"{display_path(path)} grew past {MAX_FILE_BYTES} bytes while being read")
        if len(chunk) < _CHUNK and len(buf) >= size:
            break
    return bytes(buf)


def unified_diff(display: str, old: str, new: str, *, created: bool = False) -> str:
    """`a/path` `b/path` unified diff of two texts (`/dev/null` on the left for a new file)."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a/{display}",
        tofile=f"b/{display}",
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def diff_counts(diff: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def sandbox_refusal(exc: SandboxError, path: str | None = None) -> Refusal:
    if isinstance(exc, PathOutsideWorkspace):
        where = f"{path!r} is " if path else "the path is "
        return Refusal(
            f"{where}outside the workspace {WORKSPACE} (a symlink or '..' leads out): {exc}",
            [f"only files under {WORKSPACE} can be used; do not follow symlinks that point out of it"],
        )
    hint = getattr(exc, "hint", "")
    return Refusal(f"the sandbox refused: {exc}", [hint] if hint else [])


class BuiltinTool(Tool):
    """Turns Refusal and SandboxError into error results so every tool answers the same way. A subclass
    names itself in its class line: `class FsRead(BuiltinTool, name="fs_read", group="group:fs", ...)`."""

    def __init_subclass__(
        cls,
        *,
        name: str,
        group: str,
        input_model: type[BaseModel] = ToolInput,
        read_only: bool = False,
        timeout_s: float | None = None,
        risk: Risk = Risk.LOW,
        **kw: Any,
    ) -> None:
        super().__init_subclass__(**kw)
        cls.name, cls.group, cls.input_model = name, group, input_model
        cls.read_only, cls.timeout_s, cls.risk = read_only, timeout_s, risk

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        try:
            return await self._run(args, ctx)
        except Refusal as r:
            return r.result()
        except SandboxError as exc:
            return sandbox_refusal(exc, getattr(args, "path", None)).result()

    async def _run(self, args: Any, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError
