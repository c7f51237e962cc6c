"""The helper's answers on the host: the file and background-process methods both sandboxes share (each
one request to the helper's code), the helper's plain dicts turned into the protocol's dataclasses, and
its error kinds into typed errors."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ..core import (
    DEFAULT_READ_LIMIT,
    WORKSPACE,
    BackgroundLogs,
    ExecResult,
    FileStat,
    GrepMatch,
    PathOutsideWorkspace,
    SandboxError,
)


class ErrorCode(StrEnum):
    """The kinds of error the helper sends (its HelperError subclasses' `kind`)."""

    SANDBOX = "SandboxError"
    OUTSIDE_WORKSPACE = "PathOutsideWorkspace"

    @classmethod
    def of(cls, kind: Any) -> ErrorCode:
        """The code for a kind on the wire; an unknown one is a plain sandbox error."""
        try:
            return cls(kind)
        except ValueError:
            return cls.SANDBOX


def sandbox_error(code: ErrorCode, message: str) -> SandboxError:
    if code is ErrorCode.OUTSIDE_WORKSPACE:
        return PathOutsideWorkspace(message, hint="use a path inside the project folder (/workspace)")
    return SandboxError(message)


def error_from(err: Mapping[str, Any]) -> SandboxError:
    """The error for a helper's `{"kind", "message"}`."""
    return sandbox_error(ErrorCode.of(err.get("kind")), str(err.get("message") or "the sandbox refused the operation"))


def exec_result(d: dict[str, Any]) -> ExecResult:
    return ExecResult(
        exit_code=d.get("exit_code"),
        stdout=d.get("stdout", ""),
        stderr=d.get("stderr", ""),
        timed_out=bool(d.get("timed_out")),
        truncated=bool(d.get("truncated")),
        duration_ms=float(d.get("duration_ms", 0.0)),
        oom_killed=bool(d.get("oom_killed")),
        killed_signal=d.get("killed_signal"),
    )


def file_stat(d: dict[str, Any]) -> FileStat:
    return FileStat(path=d["path"], type=d["type"], size=int(d["size"]), mtime=float(d["mtime"]), mode=int(d["mode"]))


def grep_match(d: dict[str, Any]) -> GrepMatch:
    return GrepMatch(path=d["path"], line=int(d["line"]), text=d["text"])


def background_logs(d: dict[str, Any]) -> BackgroundLogs:
    return BackgroundLogs(
        process_id=d["process_id"],
        output=d["output"],
        running=bool(d["running"]),
        exit_code=d.get("exit_code"),
        truncated=bool(d.get("truncated")),
    )


def clamp_timeout(timeout: float, maximum: float) -> float:
    if timeout is None or timeout <= 0:
        raise SandboxError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return min(float(timeout), maximum)


class HelperOps:
    """Mixin: the Sandbox protocol's file and background-process methods over `_op(name, args)`."""

    async def _op(self, op: str, args: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def read_file(self, path: str, *, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        res = await self._op("read", {"path": path, "offset": offset, "limit": limit})
        return bytes(res["data"])  # a binary frame from the helper, never base64

    async def write_file(self, path: str, data: bytes, *, make_dirs: bool = True) -> FileStat:
        args = {"path": path, "data": bytes(data), "make_dirs": make_dirs}
        return file_stat(await self._op("write", args))

    async def read_text(self, path: str, *, limit: int = DEFAULT_READ_LIMIT) -> str:
        return await self._op("read_text", {"path": path, "limit": limit})

    async def write_text(self, path: str, text: str) -> FileStat:
        return file_stat(await self._op("write", {"path": path, "text": text}))

    async def stat(self, path: str) -> FileStat | None:
        d = await self._op("stat", {"path": path})
        return None if d is None else file_stat(d)

    async def real_path(self, path: str) -> str:
        return str(await self._op("real_path", {"path": path}))

    async def list_dir(self, path: str = ".") -> list[FileStat]:
        return [file_stat(d) for d in await self._op("list", {"path": path})]

    async def glob(
        self, pattern: str, path: str = ".", *, limit: int = 200, include_ignored: bool = False,
        newest_first: bool = False,
    ) -> list[FileStat]:
        args = {"pattern": pattern, "path": path, "limit": limit, "include_ignored": include_ignored,
                "newest_first": newest_first}
        return [file_stat(d) for d in await self._op("glob", args)]

    async def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
        include_ignored: bool = False,
    ) -> list[GrepMatch]:
        args = {"pattern": pattern, "path": path, "glob": glob, "ignore_case": ignore_case, "max_results": max_results,
                "include_ignored": include_ignored}  # fmt: skip
        return [grep_match(d) for d in await self._op("grep", args)]

    async def start_background(self, command: str, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None) -> str:
        return await self._op("bg_start", {"command": command, "cwd": cwd, "env": dict(env or {})})

    async def logs(self, process_id: str) -> BackgroundLogs:
        return background_logs(await self._op("bg_logs", {"process_id": process_id}))

    async def kill(self, process_id: str) -> BackgroundLogs:
        return background_logs(await self._op("bg_kill", {"process_id": process_id}))
