"""The command tools: bash_run (foreground with streamed output, or background), bash_logs, bash_kill."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import Field, field_validator

from ..core import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    WORKSPACE,
    BackgroundLogs,
    CallField,
    ExecResult,
    PathOutsideWorkspace,
    Risk,
    Sandbox,
    SandboxError,
    TextBlock,
    ToolContext,
    ToolInput,
    ToolResult,
    one_line,
    value_text,
)
from ._common import BuiltinTool, Refusal, need_sandbox

DEFAULT_TIMEOUT_MS = int(DEFAULT_TIMEOUT_S * 1000)
MAX_TIMEOUT_MS = int(MAX_TIMEOUT_S * 1000)
# Per stream, what the model sees: the head and the tail, the middle elided.
OUTPUT_CHARS = 30_000
BG_PROCESSES_KEY = "bash_processes"
_EXECUTOR_MARGIN_S = 15.0


def head_tail(text: str, limit: int = OUTPUT_CHARS) -> tuple[str, bool]:
    """`text` if short, else its head and tail around a note of what was left out."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    left_out = len(text) - 2 * half
    return f"{text[:half]}\n… [{left_out} characters left out] …\n{text[-half:]}", True


def _first_line(command: Any, width: int = 100) -> str:
    if not isinstance(command, str):
        return "?"
    lines = command.strip().splitlines() or [""]
    line = lines[0]
    more = len(lines) > 1
    if len(line) > width:
        line, more = line[:width], True
    return line + (" …" if more else "")


class BashRunInput(ToolInput):
    command: str = Field(min_length=1, description=f"The shell command to run in {WORKSPACE}.")
    timeout_ms: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description=f"Kill the command after this many milliseconds (default {DEFAULT_TIMEOUT_MS}, "
        f"at most {MAX_TIMEOUT_MS}).",
    )
    background: bool = Field(
        default=False,
        description="Start it in the background and return a process_id at once (for servers, watchers); "
        "read its output with bash_logs and stop it with bash_kill.",
    )

    @field_validator("command")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("command is blank")
        return v


# The command's own timeout is enforced by the sandbox; the executor's must leave room for it
# (timeout_for gives the executor a per-call deadline; timeout_s is the upper bound).
class BashRun(BuiltinTool, name="bash_run", group="group:runtime", input_model=BashRunInput, read_only=False,
              timeout_s=MAX_TIMEOUT_S + _EXECUTOR_MARGIN_S, risk=Risk.MEDIUM):
    label = "Run command"
    description = (
        f"Run a shell command in the project's sandbox, in {WORKSPACE} (each call starts a fresh shell "
        "there, so `cd` does not carry over: chain with &&). "
        f"Default timeout {DEFAULT_TIMEOUT_MS // 1000} s, at most {MAX_TIMEOUT_MS // 1000} s via timeout_ms. "
        "The result gives the exit code, stdout and stderr (long output keeps its head and tail). "
        "A non-zero exit code is reported, not treated as a tool failure. "
        "Use background=true for long-running processes; then bash_logs and bash_kill."
    )

    def timeout_for(self, args: BashRunInput) -> float:
        """The executor's deadline: the command's own timeout plus room for the sandbox to report it."""
        if args.background:
            return 30.0
        return (args.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000 + _EXECUTOR_MARGIN_S

    async def _run(self, args: BashRunInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        cwd = WORKSPACE
        if args.background:
            return await _start_background(sandbox, args.command, cwd, ctx)
        requested = (args.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
        timeout = ctx.remaining(requested)  # never past the executor's own deadline
        if timeout <= 0:
            raise Refusal("no time is left before this call's deadline", ["retry the command"])
        streamed = {"stdout": [], "stderr": []}

        def on_output(stream: str, text: str) -> None:
            streamed.setdefault(stream, []).append(text)
            ctx.update(text, stream)

        run = asyncio.ensure_future(sandbox.exec(args.command, cwd=cwd, timeout=timeout, on_output=on_output))
        aborted = asyncio.ensure_future(ctx.abort.wait())
        try:
            await asyncio.wait({run, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborted.cancel()
            if not run.done():
                run.cancel()  # the sandbox kills the process when its exec is cancelled
                with contextlib.suppress(BaseException):
                    await run
        if run.cancelled():
            return _cancelled(args.command, cwd, "".join(streamed["stdout"]), "".join(streamed["stderr"]))
        return _exec_result(args.command, cwd, timeout, run.result())

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Command", value_text(raw.get("command", "")), "code"),
                  CallField("Folder", WORKSPACE, "path")]
        if raw.get("background"):
            fields.append(CallField("Runs", "in the background"))
        if isinstance(raw.get("timeout_ms"), int | float):
            fields.append(CallField("Time limit", f"{raw['timeout_ms'] / 1000:g} s"))
        return tuple(fields)

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        d = result.get("details") or {}
        if "exit_code" not in d:
            return super().outcome_fields(raw, result)
        code = d.get("exit_code")
        exit_ = ("timed out" if d.get("timed_out") else "out of memory" if d.get("oom_killed")
                 else "stopped" if d.get("cancelled") else "killed" if code is None else str(code))
        out = [CallField("Exit", exit_)]
        if d.get("cwd"):
            out.append(CallField("Folder", str(d["cwd"]), "path"))
        err = next((s for s in str(d.get("stderr") or "").splitlines() if s.strip()), "")
        if err and code not in (0, None):
            out.append(CallField("Error", one_line(err, 300)))
        lines = sum(str(d.get(k) or "").count("\n") for k in ("stdout", "stderr"))
        out.append(CallField("Output", f"{lines} line{'s' if lines != 1 else ''}"))
        return tuple(out)

    def summarize(self, raw: dict[str, Any]) -> str:
        s = f"bash_run: {_first_line(raw.get('command'))}"
        return s + " (background)" if raw.get("background") else s


async def _start_background(sandbox: Sandbox, command: str, cwd: str, ctx: ToolContext) -> ToolResult:
    pid = await sandbox.start_background(command, cwd)
    ctx.state.setdefault(BG_PROCESSES_KEY, {})[pid] = command
    return ToolResult.text(
        f"Started in the background: process_id={pid}\n"
        f"Read its output with bash_logs {{\"process_id\": \"{pid}\"}}; "
        f"stop it with bash_kill {{\"process_id\": \"{pid}\"}}.",
        process_id=pid,
        background=True,
        command=command,
        cwd=cwd,
    )


def _cancelled(command: str, cwd: str, out: str, err: str) -> ToolResult:
    text = "Cancelled by the user; the command was stopped.\n" + _streams(out, err)[0]
    return ToolResult(
        content=[TextBlock(text)],
        details={"command": command, "cwd": cwd, "exit_code": None, "cancelled": True,
                 "timed_out": False, "truncated": False, "oom_killed": False, "duration_ms": None},
        is_error=True,
    )


def _streams(stdout: str, stderr: str) -> tuple[str, bool, str, str]:
    out, cut_out = head_tail(stdout)
    err, cut_err = head_tail(stderr)
    parts = []
    if out:
        parts.append(f"stdout:\n{out.rstrip(chr(10))}")
    if err:
        parts.append(f"stderr:\n{err.rstrip(chr(10))}")
    return ("\n".join(parts) if parts else "(no output)"), cut_out or cut_err, out, err


def _exec_result(command: str, cwd: str, timeout: float, res: ExecResult) -> ToolResult:
    body, elided, out, err = _streams(res.stdout, res.stderr)
    head: list[str] = []
    if res.timed_out:
        head.append(f"TIMED OUT after {timeout:g} s: the command was killed (raise timeout_ms, at most "
                    f"{MAX_TIMEOUT_MS}, or run it with background=true).")
    if res.oom_killed:
        head.append("KILLED: out of memory (the sandbox's memory limit was reached).")
    if res.exit_code is None:
        sig = f" by signal {res.killed_signal}" if res.killed_signal else ""
        head.append(f"exit code: none (the process was killed{sig})")
    else:
        head.append(f"exit code: {res.exit_code}")
    if res.truncated:
        head.append("TRUNCATED: output passed the sandbox's limit; the rest was dropped "
                    "(redirect to a file and fs_read or grep it).")
    elif elided:
        head.append("Long output: only the head and tail of each stream are shown.")
    is_error = res.timed_out or res.oom_killed or res.exit_code is None
    return ToolResult(
        content=[TextBlock("\n".join(head) + "\n" + body)],
        details={
            "command": command,
            "cwd": cwd,
            "exit_code": res.exit_code,
            "duration_ms": round(res.duration_ms, 1),
            "timed_out": res.timed_out,
            "truncated": res.truncated or elided,
            "oom_killed": res.oom_killed,
            "killed_signal": res.killed_signal,
            "stdout": out,
            "stderr": err,
        },
        is_error=is_error,
    )


class ProcessInput(ToolInput):
    process_id: str = Field(
        min_length=1, description="The process_id bash_run returned with background=true."
    )


async def _logs(ctx: ToolContext, process_id: str, *, kill: bool) -> BackgroundLogs:
    sandbox = need_sandbox(ctx)
    try:
        return await (sandbox.kill(process_id) if kill else sandbox.logs(process_id))
    except (LookupError, SandboxError) as exc:
        if isinstance(exc, PathOutsideWorkspace):
            raise
        known = sorted(ctx.state.get(BG_PROCESSES_KEY, {}))
        raise Refusal(
            f"background process {process_id!r}: {exc}",
            [f"process ids started in this session: {', '.join(known)}" if known
             else "start one with bash_run background=true"],
        ) from None


def _logs_result(logs: BackgroundLogs, *, killed: bool) -> ToolResult:
    output, elided = head_tail(logs.output)
    if killed:
        status = f"Stopped process {logs.process_id}"
        status += f" (exit code {logs.exit_code})." if logs.exit_code is not None else "."
    elif logs.running:
        status = f"Process {logs.process_id} is still running."
    else:
        status = f"Process {logs.process_id} has exited with code {logs.exit_code}."
    notes = []
    if logs.truncated:
        notes.append("[older output was dropped: the log keeps only the most recent part]")
    if elided:
        notes.append("[long output: only its head and tail are shown]")
    text = "\n".join([status, *notes, "output:", output.rstrip("\n") if output else "(no output yet)"])
    return ToolResult.text(
        text,
        process_id=logs.process_id,
        running=logs.running,
        exit_code=logs.exit_code,
        truncated=logs.truncated or elided,
        output=output,
    )


class BashLogs(BuiltinTool, name="bash_logs", group="group:runtime", input_model=ProcessInput, read_only=True,
               timeout_s=30.0, risk=Risk.LOW):
    label = "Read process output"
    description = (
        "Read the output so far of a background process started by bash_run, and whether it is still running."
    )

    async def _run(self, args: ProcessInput, ctx: ToolContext) -> ToolResult:
        return _logs_result(await _logs(ctx, args.process_id, kill=False), killed=False)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return (CallField("Process", value_text(raw.get("process_id", "?"))),)

    def summarize(self, raw: dict[str, Any]) -> str:
        return f"bash_logs {raw.get('process_id', '?')}"


class BashKill(BuiltinTool, name="bash_kill", group="group:runtime", input_model=ProcessInput, read_only=False,
               timeout_s=30.0, risk=Risk.MEDIUM):
    label = "Stop process"
    description = "Stop a background process started by bash_run and return its last output."

    async def _run(self, args: ProcessInput, ctx: ToolContext) -> ToolResult:
        return _logs_result(await _logs(ctx, args.process_id, kill=True), killed=True)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return (CallField("Process", value_text(raw.get("process_id", "?"))),)

    def summarize(self, raw: dict[str, Any]) -> str:
        return f"bash_kill {raw.get('process_id', '?')}"
