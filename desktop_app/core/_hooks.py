"""Pre and post hooks around each tool call, and the built-in ones: truncation, redaction, danger."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from ._shell import parse_command
from ._tool import TextBlock, ToolResult


class PreAction(StrEnum):
    CONTINUE = "continue"
    DENY = "deny"
    ASK = "ask"
    RESULT = "result"  # short-circuit: this result stands in for running the tool
    REWRITE = "rewrite"


@dataclass(slots=True)
class PreHookResult:
    action: PreAction = PreAction.CONTINUE
    reason: str = ""
    result: ToolResult | None = None
    input: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    risk: str | None = None

    @classmethod
    def proceed(cls) -> PreHookResult:
        return cls()

    @classmethod
    def deny(cls, reason: str, result: ToolResult | None = None) -> PreHookResult:
        return cls(PreAction.DENY, reason, result=result)

    @classmethod
    def ask(cls, reason: str, *, risk: str = "medium", **meta: Any) -> PreHookResult:
        return cls(PreAction.ASK, reason, meta=meta, risk=risk)

    @classmethod
    def short_circuit(cls, result: ToolResult, reason: str = "") -> PreHookResult:
        return cls(PreAction.RESULT, reason, result=result)

    @classmethod
    def rewrite(cls, input: dict[str, Any], reason: str = "") -> PreHookResult:
        return cls(PreAction.REWRITE, reason, input=input)


class PostAction(StrEnum):
    KEEP = "keep"
    UPDATE = "update"  # the same result, amended (truncated, redacted)
    REPLACE = "replace"  # a different result altogether


@dataclass(slots=True)
class PostHookResult:
    action: PostAction = PostAction.KEEP
    result: ToolResult | None = None
    note: str = ""

    @classmethod
    def keep(cls) -> PostHookResult:
        return cls()

    @classmethod
    def update(cls, result: ToolResult, note: str = "") -> PostHookResult:
        return cls(PostAction.UPDATE, result, note)

    @classmethod
    def replace(cls, result: ToolResult, note: str = "") -> PostHookResult:
        return cls(PostAction.REPLACE, result, note)


@dataclass(slots=True, frozen=True)
class HookCall:
    """What a hook sees of a call."""

    call_id: str
    session_id: str
    name: str
    input: dict[str, Any]
    read_only: bool


class PreHook(Protocol):
    name: str

    def __call__(self, call: HookCall) -> Awaitable[PreHookResult | None]: ...


class PostHook(Protocol):
    name: str

    def __call__(self, call: HookCall, result: ToolResult) -> Awaitable[PostHookResult | None]: ...


@dataclass(slots=True)
class HookChain:
    pre: list[PreHook] = field(default_factory=list)
    post: list[PostHook] = field(default_factory=list)


def pre_hook(name: str) -> Callable[[Callable[[HookCall], Awaitable[PreHookResult | None]]], PreHook]:
    """Turn an async function into a named pre hook."""

    def wrap(fn: Callable[[HookCall], Awaitable[PreHookResult | None]]) -> PreHook:
        fn.name = name  # type: ignore[attr-defined]
        return fn  # type: ignore[return-value]

    return wrap


def post_hook(
    name: str,
) -> Callable[[Callable[[HookCall, ToolResult], Awaitable[PostHookResult | None]]], PostHook]:
    def wrap(fn: Callable[[HookCall, ToolResult], Awaitable[PostHookResult | None]]) -> PostHook:
        fn.name = name  # type: ignore[attr-defined]
        return fn  # type: ignore[return-value]

    return wrap


# -- built-in: dangerous commands ------------------------------------------------------------------
_DANGER: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\s*:\s*\(\s*\)\s*\{.*:\s*\|\s*:\s*&.*\}", re.S), "fork bomb"),
    (re.compile(r"\b(\w+)\s*\(\s*\)\s*\{[^}]*\b\1\s*\|\s*\1\s*&"), "fork bomb"),
    (re.compile(r"\bmkfs(\.\w+)?\b"), "formats a file system (mkfs)"),
    (re.compile(r"\bdd\b[^|;&]*\bof=/dev/(?!null\b)"), "writes to a device with dd"),
    (re.compile(r"(curl|wget|fetch)\b[^|]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b"), "pipes a download into a shell"),
    (re.compile(r">\s*/dev/(sd|nvme|hd|vd|xvd|mmcblk)"), "writes to a block device"),
    (re.compile(r"\bchmod\s+(-R\s+)?[0-7]*777\s+/(\s|$)"), "opens up the root file system"),
]


def _rm_is_catastrophic(argv: list[str]) -> bool:
    if not argv or argv[0] not in ("rm", "sudo"):
        return False
    if argv[0] == "sudo":
        return _rm_is_catastrophic(argv[1:])
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-") and not a.startswith("--"))
    recursive = "r" in flags.lower() or "--recursive" in argv
    targets = [a for a in argv[1:] if not a.startswith("-")]
    roots = {"/", "/*", "~", "~/", "$HOME", "/workspace", "/workspace/", ".", "./", "*", "/usr", "/etc", "/home"}
    return recursive and (any(t in roots for t in targets) or "--no-preserve-root" in argv)


def dangerous_reason(command: str) -> str | None:
    """Why a shell command looks catastrophic, or None."""
    for sub in parse_command(command).commands:
        if _rm_is_catastrophic(sub.argv):
            return f"recursive delete of a root or home folder: {sub.text!r}"
    for pattern, why in _DANGER:
        if pattern.search(command):
            return why
    return None


class DangerousCommandHook:
    """Asks, with risk high, before rm -rf /, mkfs, dd to a device, fork bombs and curl | sh."""

    name = "dangerous-command"

    async def __call__(self, call: HookCall) -> PreHookResult | None:
        command = call.input.get("command")
        if not isinstance(command, str):
            return None
        why = dangerous_reason(command)
        if why is None:
            return None
        return PreHookResult.ask(f"dangerous command: {why}", risk="high", pattern=why)


# -- built-in: secret redaction --------------------------------------------------------------------
_SECRET_PATTERNS: list[re.Pattern[str]] = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bsk-[A-Za-z0-9]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-~+/]{16,}=*"),
]
_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Za-z0-9_]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)[A-Za-z0-9_]*)"
    r"(\s*[=:]\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s'\",;]+)"
)
REDACTED = "[REDACTED]"


class SecretRedactionHook:
    """Replaces API keys, tokens, `password=` values and the configured API key in every result."""

    name = "secret-redaction"

    def __init__(self, extra_secrets: list[str] | None = None) -> None:
        self._literals = sorted({s for s in (extra_secrets or []) if s and len(s) >= 8}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for lit in self._literals:
            text = text.replace(lit, REDACTED)
        for pat in _SECRET_PATTERNS:
            text = pat.sub(REDACTED if pat.groups == 0 else (lambda m: f"{m.group(1)} {REDACTED}"), text)
        return _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._redact_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redact_value(v) for k, v in value.items()}
        return value

    async def __call__(self, call: HookCall, result: ToolResult) -> PostHookResult | None:
        content = [TextBlock(self.redact(b.text)) if isinstance(b, TextBlock) else b for b in result.content]
        details = self._redact_value(result.details)
        if content == result.content and details == result.details:
            return None
        return PostHookResult.update(replace(result, content=content, details=details), "secrets redacted")


# -- built-in: output truncation -------------------------------------------------------------------
class OutputTruncationHook:
    """Keeps the head and tail of long text output; the full text is saved as an artifact for the UI."""

    name = "output-truncation"

    def __init__(self, artifacts_dir: str | Path | None, *, max_chars: int = 30_000) -> None:
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir else None
        self.max_chars = max_chars

    async def __call__(self, call: HookCall, result: ToolResult) -> PostHookResult | None:
        text = result.text_content
        if len(text) <= self.max_chars or any(not isinstance(b, TextBlock) for b in result.content):
            return None
        head = text[: self.max_chars * 2 // 3]
        tail = text[-(self.max_chars // 3) :]
        dropped = len(text) - len(head) - len(tail)
        artifact = None
        if self.artifacts_dir is not None:
            artifact = self.artifacts_dir / f"{call.call_id}.txt"
            await asyncio.get_running_loop().run_in_executor(None, _write_artifact, artifact, text)
        where = f" The full output is saved as {artifact.name}." if artifact else ""
        marker = f"\n\n[... {dropped} characters truncated.{where} ...]\n\n"
        details = dict(result.details)
        details["truncated_chars"] = dropped
        if artifact:
            details["artifact"] = str(artifact)
        return PostHookResult.update(
            replace(result, content=[TextBlock(head + marker + tail)], details=details),
            f"truncated {dropped} characters",
        )


def _write_artifact(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def builtin_hooks(
    *, api_key: str | None = None, artifacts_dir: str | Path | None = None, max_output_chars: int = 30_000
) -> HookChain:
    """The default chain: danger check before; truncation, then redaction, after."""
    return HookChain(
        pre=[DangerousCommandHook()],
        post=[
            OutputTruncationHook(artifacts_dir, max_chars=max_output_chars),
            SecretRedactionHook([api_key] if api_key else []),
        ],
    )
