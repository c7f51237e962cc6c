"""Turning the helper's plain dicts into the protocol's dataclasses and errors (shared by every sandbox)."""

from __future__ import annotations

from typing import Any

from ..core import BackgroundLogs, ExecResult, FileStat, GrepMatch, PathOutsideWorkspace, SandboxError

# Names whose values never reach a command on the host (LocalSandbox): API keys and the like.
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def error_from(err: dict[str, Any]) -> SandboxError:
    message = str(err.get("message") or "the sandbox refused the operation")
    if err.get("kind") == "PathOutsideWorkspace":
        return PathOutsideWorkspace(message, hint="use a path inside the project folder (/workspace)")
    return SandboxError(message)


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
