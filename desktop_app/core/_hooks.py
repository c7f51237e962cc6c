"""Pre and post hooks around each tool call, how a chain of them runs, and the built-in ones:
truncation, redaction, danger.

A hook is an async callable that runs on the desk's event loop: a hook whose work is synchronous
(parsing, matching, hashing) must not do it there. Wrap it in `OffloadedPreHook`, or hand the work to
a thread itself (`asyncio.to_thread`), as the built-in ones do. The executor gives the pre hooks a
deadline; past it the call asks a person (risk high), it never passes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ._record import Provenance, Risk
from ._redaction import DEFAULT_REDACTOR, INLINE_REDACT_CHARS, Redactor
from ._tool import TextBlock, ToolResult
from .policy import analyse_command, assess_command

_T = TypeVar("_T")


class PreAction(StrEnum):
    CONTINUE = "continue"
    DENY = "deny"
    ASK = "ask"
    RESULT = "result"  # short-circuit: this result stands in for running the tool
    REWRITE = "rewrite"
    NOTE = "note"  # the call goes on; the reason is written into its audit trail


@dataclass(slots=True)
class PreHookResult:
    action: PreAction = PreAction.CONTINUE
    reason: str = ""
    result: ToolResult | None = None
    input: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    risk: Risk | None = None

    @classmethod
    def proceed(cls) -> PreHookResult:
        return cls()

    @classmethod
    def deny(cls, reason: str, result: ToolResult | None = None) -> PreHookResult:
        return cls(PreAction.DENY, reason, result=result)

    @classmethod
    def ask(cls, reason: str, *, risk: Risk | str = Risk.MEDIUM, **meta: Any) -> PreHookResult:
        return cls(PreAction.ASK, reason, meta=meta, risk=Risk.of(risk))

    @classmethod
    def short_circuit(cls, result: ToolResult, reason: str = "") -> PreHookResult:
        return cls(PreAction.RESULT, reason, result=result)

    @classmethod
    def rewrite(cls, input: dict[str, Any], reason: str = "") -> PreHookResult:
        return cls(PreAction.REWRITE, reason, input=input)

    @classmethod
    def note(cls, text: str) -> PreHookResult:
        return cls(PreAction.NOTE, text)


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
class HookStep:
    """One pre hook's answer other than CONTINUE, with the provenance it leaves on the record."""

    hook: str
    answer: PreHookResult
    provenance: Provenance
    original_input: dict[str, Any] | None = None  # the input the hook saw
    raised: bool = False  # the hook raised: fail closed, a deny that names it

    @property
    def stops(self) -> bool:
        """A deny, or a result that stands in for running the tool, ends the chain."""
        action = self.answer.action
        return action is PreAction.DENY or (action is PreAction.RESULT and self.answer.result is not None)

    @property
    def rewrites(self) -> bool:
        return self.answer.action is PreAction.REWRITE and self.answer.input is not None

    @property
    def deny_note(self) -> str:
        return self.answer.reason if self.raised else f"denied by hook {self.hook}: {self.answer.reason}"


@dataclass(slots=True)
class PreVerdict:
    """What the pre hooks said about one call, in the order they said it. The chain stops at the
    first hook that denies (or raises) or answers with a result; later hooks see rewritten input."""

    steps: list[HookStep] = field(default_factory=list)

    @property
    def stop(self) -> HookStep | None:
        """The hook that ended the chain with a deny or a result, if one did."""
        last = self.steps[-1] if self.steps else None
        return last if last is not None and last.stops else None

    @property
    def asks(self) -> list[HookStep]:
        return [s for s in self.steps if s.answer.action is PreAction.ASK]


@dataclass(slots=True)
class PostVerdict:
    """The result after the post hooks, the notes of those that changed it, and the hook that raised
    (the output is then withheld)."""

    result: ToolResult
    changes: list[tuple[str, str]] = field(default_factory=list)  # (hook name, what it did)
    failed_hook: str = ""
    error: str = ""  # why the output was withheld


def _hook_name(hook: PreHook | PostHook) -> str:
    return getattr(hook, "name", type(hook).__name__)


@dataclass(slots=True)
class HookChain:
    pre: list[PreHook] = field(default_factory=list)
    post: list[PostHook] = field(default_factory=list)

    async def run_pre(self, call: HookCall, *, deadline_s: float | None = None) -> PreVerdict:
        """Run the pre hooks in order. A hook that raises is a deny naming it (fail closed). With a
        deadline, the chain stops at the hook that is still running when it passes: that hook asks,
        with risk high, and the hooks after it do not run."""
        verdict = PreVerdict()
        loop = asyncio.get_running_loop()
        end = None if deadline_s is None else loop.time() + deadline_s
        for hook in self.pre:
            name = _hook_name(hook)
            t0 = time.perf_counter()
            try:
                # a hook with a timeout of its own (a user's command) enforces it, and fails closed there
                answer = await _within(hook(call), None if getattr(hook, "own_deadline", False) else end)
            except TimeoutError:
                prov = Provenance("hook", name, decision="ask", elapsed_ms=(time.perf_counter() - t0) * 1000)
                late = PreHookResult.ask(NOT_JUDGED_IN_TIME, risk=Risk.HIGH, late_hook=name)
                verdict.steps.append(HookStep(name, late, prov, original_input=call.input))
                return verdict
            except Exception as e:
                prov = Provenance("hook", name, decision="deny", elapsed_ms=(time.perf_counter() - t0) * 1000)
                why = PreHookResult.deny(f"pre hook {name!r} raised {type(e).__name__}: {e}")
                verdict.steps.append(HookStep(name, why, prov, raised=True))
                return verdict
            if answer is None or answer.action is PreAction.CONTINUE:
                continue
            prov = Provenance("hook", name, decision=answer.action.value,
                              elapsed_ms=(time.perf_counter() - t0) * 1000)
            step = HookStep(name, answer, prov, original_input=call.input)
            verdict.steps.append(step)
            if step.stops:
                return verdict
            if step.rewrites:
                call = replace(call, input=answer.input)
        return verdict

    async def run_post(self, call: HookCall, result: ToolResult) -> PostVerdict:
        """Run the post hooks in order over the result. A hook that raises withholds the output (fail
        closed: a broken redaction hook must not let the raw output through)."""
        verdict = PostVerdict(result)
        for hook in self.post:
            name = _hook_name(hook)
            try:
                answer = await hook(call, verdict.result)
            except Exception as e:
                verdict.failed_hook = name
                verdict.error = f"post hook {name!r} raised {type(e).__name__}: {e}; the output was withheld"
                return verdict
            if answer is not None and answer.action is not PostAction.KEEP and answer.result is not None:
                verdict.result = answer.result
                verdict.changes.append((name, f"{answer.action.value}: {answer.note}".strip(": ")))
        return verdict


NOT_JUDGED_IN_TIME = "the command could not be judged in time"


async def _within(aw: Awaitable[Any], end: float | None) -> Any:
    """`aw`'s result, or TimeoutError once the loop's clock passes `end` (None: no deadline)."""
    async with asyncio.timeout_at(end):  # in this task: cheaper than wait_for's task per hook
        return await aw


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def hook_pool() -> ThreadPoolExecutor:
    """The threads the built-in hooks work on: their own, so a slow judgement never starves the loop's
    default executor (where the store and the sandboxes wait)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-desk-hooks")
        return _pool


class OffloadedPreHook:
    """A pre hook run on a worker thread, in an event loop of its own, so synchronous work inside it
    cannot hold up the desk's loop. `when(call)` names the calls it looks at; the others skip the hop.
    The hook must not touch objects of the desk's loop (futures, locks)."""

    def __init__(self, hook: PreHook, when: Callable[[HookCall], bool] | None = None) -> None:
        self.hook = hook
        self.name = _hook_name(hook)
        self.when = when

    async def __call__(self, call: HookCall) -> PreHookResult | None:
        if self.when is not None and not self.when(call):
            return None
        hook = self.hook
        return await asyncio.get_running_loop().run_in_executor(hook_pool(), lambda: asyncio.run(hook(call)))


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
def dangerous_reason(command: str) -> str | None:
    """Why a shell command is dangerous (high risk), or None: the policy's own judgement of its effect."""
    risk, why = assess_command(analyse_command(command))
    return why if risk is Risk.HIGH else None


class DangerousCommandHook:
    """Asks, with risk high, before a command that destroys: the same judgement as the policy's risk
    (recursive deletes of the workspace or /, force-pushes, mkfs, dd, fork bombs, downloads run)."""

    name = "dangerous-command"

    async def __call__(self, call: HookCall) -> PreHookResult | None:
        command = call.input.get("command")
        if not isinstance(command, str):
            return None
        why = dangerous_reason(command)
        if why is None:
            return None
        return PreHookResult.ask(f"dangerous command: {why}", risk=Risk.HIGH, pattern=why)


# -- built-in: secret redaction --------------------------------------------------------------------
# The patterns live in `_redaction.py` (RE2: linear time, where Python's re took minutes on the
# assignment pattern over a 200 KB run of `password`). INLINE_REDACT_CHARS is the one size past which
# a value is redacted on a worker thread: results here, inputs and messages through `off_loop_when_large`.


def text_size(value: Any, limit: int) -> int:
    """The characters of text in `value` (a call's input, or a result with its blocks and details),
    counted only until past `limit`: enough to choose between the loop and a worker thread."""
    stack, total = [value], 0
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, ToolResult):
            stack += [b.text for b in v.content if isinstance(b, TextBlock)] + [v.details]
        elif isinstance(v, dict):
            total += sum(len(k) for k in v if isinstance(k, str))
            stack += list(v.values())
        elif isinstance(v, list | tuple):
            stack += list(v)
        else:
            total += 1 if not isinstance(v, bytes) else len(v)
    return total


async def off_loop_when_large(value: Any, fn: Callable[..., _T], *args: Any) -> _T:
    """`fn(*args)`, on a hook thread when `value` holds more than INLINE_REDACT_CHARS of text, else in
    place (a thread hop costs more than redacting a few KB). RE2 costs ~10 ms per MB: a 50 MB input
    redacted on the loop froze the window for a second."""
    if text_size(value, INLINE_REDACT_CHARS) <= INLINE_REDACT_CHARS:
        return fn(*args)
    return await asyncio.get_running_loop().run_in_executor(hook_pool(), partial(fn, *args))


async def redact_off_loop(redactor: Redactor, value: Any) -> Any:
    """`redactor.redact_value(value)`, off the loop when `value` is large (see `off_loop_when_large`)."""
    return await off_loop_when_large(value, redactor.redact_value, value)


class SecretRedactionHook:
    """Replaces API keys, tokens, `password=` values and the configured API key in every result, in
    linear time (on a worker thread when the result is large). The executor runs it before every other
    post hook, so truncation and its artifact see redacted text."""

    name = "secret-redaction"

    def __init__(self, extra_secrets: list[str] | None = None, *, redactor: Redactor | None = None) -> None:
        base = redactor or DEFAULT_REDACTOR
        self.redactor = base.with_literals(list(extra_secrets)) if extra_secrets else base

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    async def __call__(self, call: HookCall, result: ToolResult) -> PostHookResult | None:
        # RE2 on a few KB takes microseconds: no thread hop
        if text_size(result, INLINE_REDACT_CHARS) <= INLINE_REDACT_CHARS:
            return self._redacted(result)
        return await asyncio.get_running_loop().run_in_executor(hook_pool(), self._redacted, result)

    def _redacted(self, result: ToolResult) -> PostHookResult | None:
        content = [TextBlock(self.redact(b.text)) if isinstance(b, TextBlock) else b for b in result.content]
        details = self.redactor.redact_value(result.details)
        if content == result.content and details is result.details:
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
    """The default chain: redaction, then truncation (of the redacted text, whose artifact is written from
    it), after each call. No danger hook before: the policy itself judges a command's harm with the same
    function (`assess_risk`) and asks for high risk in every mode, so `DangerousCommandHook` would only
    repeat that ask (it stays available for custom chains)."""
    return HookChain(
        post=[
            SecretRedactionHook([api_key] if api_key else []),
            OutputTruncationHook(artifacts_dir, max_chars=max_output_chars),
        ],
    )


# -- built-in: only the tools offered to the model run ------------------------------------------------------
class OfferedToolsHook:
    """Denies a call of a tool the model was not offered (switched off by the person, outside the project's
    tool profile, denied outright by a rule): a model that names it anyway gets the reason, and it never runs.
    `why_not(name)` says why a tool is not offered, or None when it is."""

    name = "offered-tools"

    def __init__(self, why_not: Callable[[str], str | None]) -> None:
        self.why_not = why_not

    async def __call__(self, call: HookCall) -> PreHookResult | None:
        why = self.why_not(call.name)
        return None if why is None else PreHookResult.deny(why)


def redaction_first(hooks: HookChain, redactor: Redactor | None) -> tuple[HookChain, Redactor]:
    """The chain with secret redaction as its first post hook (added when missing), so that no other
    post hook (truncation, its artifact) sees a secret; and the redactor it uses, which the executor
    also applies to inputs and streamed output."""
    found = [h for h in hooks.post if isinstance(h, SecretRedactionHook)]
    if found:
        hook = found[0]
        if redactor is not None and redactor is not hook.redactor:
            hook = SecretRedactionHook(redactor=redactor.with_literals(list(hook.redactor.literals)))
    else:
        hook = SecretRedactionHook(redactor=redactor or DEFAULT_REDACTOR)
    others = [h for h in hooks.post if not isinstance(h, SecretRedactionHook)]
    return HookChain(pre=hooks.pre, post=[hook, *others]), hook.redactor
