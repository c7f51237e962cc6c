"""git_commit: the agent's commit, made by the desk on the host (`.git` is read-only in every sandbox). Offered
only when the project's git_commit setting is on; judged like any write (asked in ask mode, refused in plan,
read-only and strict); git runs shut in (sandbox/_host_git.py), handed over by the runtime."""

from __future__ import annotations

import posixpath
from typing import Any, Protocol

from pydantic import Field

from ..core import (
    WORKSPACE,
    CallField,
    SandboxDescription,
    ToolContext,
    ToolInput,
    ToolInputError,
    ToolResult,
    value_text,
)
from ._common import BuiltinTool, Refusal

GIT_COMMIT_TOOL = "git_commit"
MAX_PATHS = 500


class GitCommitInput(ToolInput):
    message: str = Field(min_length=1, max_length=10_000, description="The commit message.")
    paths: list[str] = Field(default_factory=list, max_length=MAX_PATHS,
                             description="Workspace paths to commit (added first, new files too); empty: every "
                             "change in the workspace.")


def _pathspecs(paths: list[str]) -> list[str]:
    """Workspace-relative paths, literal; a path outside the workspace or into .git is refused."""
    out = []
    for raw in paths:
        if not raw or "\x00" in raw or raw.startswith("~"):
            raise ToolInputError(f"{raw!r} is not a workspace path", hint="pass paths relative to /workspace")
        norm = posixpath.normpath(posixpath.join(WORKSPACE, raw))
        rel = posixpath.relpath(norm, WORKSPACE)
        if rel == ".." or rel.startswith("../"):
            raise ToolInputError(f"{raw!r} is outside the workspace", hint="pass paths relative to /workspace")
        if rel == ".git" or rel.startswith(".git/"):
            raise ToolInputError(f"{raw!r} is inside .git", hint="name the files to commit, not git's own")
        out.append(rel)
    return out


class HostRepository(Protocol):
    """The project's repository on the host, shut in (sandbox.ProjectGit): the runtime hands it over, so the
    tool itself touches nothing of the host."""

    async def status(self, paths: list[str]) -> str: ...

    async def commit(self, message: str, paths: list[str]) -> dict[str, Any]: ...


class GitCommit(BuiltinTool, name=GIT_COMMIT_TOOL, group="group:vcs", input_model=GitCommitInput,
               timeout_s=300.0):
    label = "Commit changes"
    description = (
        "Commit changes of the workspace to its git repository (the desk runs git on the host; .git is "
        "read-only in the sandbox, so `git commit` there fails). Give a message and, optionally, the paths "
        "to commit; without paths every change is committed. Hooks and the repository's helpers do not run."
    )
    tags = ("vcs",)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        paths = raw.get("paths") if isinstance(raw.get("paths"), list) else []
        return (CallField("Message", value_text(raw.get("message", ""))),
                CallField("Files", value_text(", ".join(map(str, paths))) if paths else "every change", "path"))

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        d = result.get("details") or {}
        if result.get("is_error") or "commit" not in d:
            return super().outcome_fields(raw, result)
        return (CallField("Commit", f"{str(d['commit'])[:12]} on {d.get('branch', '?')}"),
                CallField("Files", value_text(", ".join(map(str, d.get("files") or []))), "path"))

    def __init__(self, folder: str, repository: HostRepository) -> None:
        self.folder, self.repository = folder, repository

    def where(self, sandbox: Any) -> SandboxDescription:
        return SandboxDescription(kind="host", unsandboxed=True, host_path=self.folder)

    async def validate(self, args: Any, ctx: ToolContext) -> None:
        _pathspecs(args.paths)

    async def dry_run(self, args: Any, ctx: ToolContext) -> str | None:
        """What would be committed (git status --short), or the refusal before anybody is asked."""
        return await self.repository.status(_pathspecs(args.paths)) or "(nothing to commit)"

    async def _run(self, args: Any, ctx: ToolContext) -> ToolResult:
        try:
            done = await self.repository.commit(args.message, _pathspecs(args.paths))
        except ToolInputError as exc:
            raise Refusal(str(exc), [exc.hint] if exc.hint else []) from None
        files = list(done["files"])
        text = (f"committed {done['commit'][:12]} on {done['branch']}: {done['subject']} "
                f"({len(files)} file{'s' * (len(files) != 1)})")
        return ToolResult.text(text, commit=done["commit"], branch=done["branch"], files=files[:100],
                               file_count=len(files))
