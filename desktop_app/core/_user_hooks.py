"""The person's own hooks, like Claude Code's: a command run INSIDE the sandbox before (PreToolUse) or after
(PostToolUse) each call of a matching tool, given the call as JSON on stdin, which can deny or annotate it.

A user hook can only narrow what runs: "allow" from a hook is "go on" (the policy still decides). A pre hook
that fails (a crash, an exit code other than 0 and 2, a timeout, no sandbox) denies the call: fail closed. A
post hook that fails leaves the result as it was, with the failure added to it and to the audit (fail open:
the call has already run, and hiding its output would help nobody).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError, SandboxError
from ._hooks import HookCall, HookChain, PostHookResult, PreHookResult
from ._record import Risk
from ._tool import TextBlock, ToolResult

if TYPE_CHECKING:
    from ._sandbox import ExecResult, Sandbox

USER_HOOK_EVENTS = ("PreToolUse", "PostToolUse")
HOOKS_FILE = ".agent-desk/hooks.toml"
DEFAULT_HOOK_TIMEOUT_S = 10.0
MAX_HOOK_TIMEOUT_S = 120.0
HOOK_VALUE_CHARS = 32_000  # a longer string of the call is cut (the hook input travels in the environment)
HOOK_INPUT_BYTES = 100_000  # the whole input, under Linux's 128 KiB limit on one environment string
HOOK_NOTE_CHARS = 4_000  # what a hook says is kept to this much
DENY_EXIT_CODE = 2
_GLOB_ONLY = re.compile(r"[A-Za-z0-9_\-*?]*")
# The hook's JSON goes in through the environment and out on the command's stdin: the sandbox's exec takes
# no stdin, and an argument would show in `ps` to the tools' processes.
_WRAPPER = 'printf "%s" "$AGENT_DESK_HOOK_INPUT" | (unset AGENT_DESK_HOOK_INPUT; exec sh -c "$AGENT_DESK_HOOK_COMMAND")'


@dataclass(frozen=True, slots=True)
class UserHookSpec:
    """One configured hook: when it runs (event, tool matcher), what it runs, for how long, and from where."""

    event: str
    command: str
    matcher: str = "*"
    timeout_s: float = DEFAULT_HOOK_TIMEOUT_S
    source: str = "settings"  # "settings" or the project's hooks file
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.event}({self.matcher})"

    def matches(self, tool_name: str) -> bool:
        """`*` or empty: every tool; letters, digits, `_`, `-`, `*`, `?` only: a glob; else a regex (whole name)."""
        m = self.matcher
        if m in ("", "*"):
            return True
        if _GLOB_ONLY.fullmatch(m):
            return fnmatchcase(tool_name, m)
        return re.fullmatch(m, tool_name) is not None


def hooks_digest(text: str | bytes) -> str:
    """The digest a project's hooks file is granted by: sha256 of its bytes."""
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def parse_user_hooks(data: Any, source: str) -> list[UserHookSpec]:
    """Hooks from `{"PreToolUse": [{matcher, command, timeout, name}], "PostToolUse": [...]}` (the settings'
    `hooks`, or a hooks.toml's tables). Anything else is a ConfigError that says where and how to fix it."""
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: hooks must be a table of PreToolUse / PostToolUse lists",
                          hint='write [[PreToolUse]] matcher = "bash_run" command = "..."')
    specs: list[UserHookSpec] = []
    for event, entries in data.items():
        if event not in USER_HOOK_EVENTS:
            raise ConfigError(f"{source}: unknown hook event {event!r}",
                              hint=f"use one of {', '.join(USER_HOOK_EVENTS)}")
        if not isinstance(entries, list):
            raise ConfigError(f"{source}: {event} must be a list of hooks", hint=f"write [[{event}]] tables")
        specs += [_spec(event, entry, f"{source}: {event}[{i}]", source) for i, entry in enumerate(entries)]
    return specs


def _spec(event: str, entry: Any, where: str, source: str) -> UserHookSpec:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table with a command")
    unknown = set(entry) - {"matcher", "command", "timeout", "name"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}", hint="a hook has matcher, command, timeout, name")
    command, matcher = entry.get("command"), entry.get("matcher", "*")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}: 'command' must be a non-empty string", hint='e.g. command = "./check.sh"')
    if not isinstance(matcher, str):
        raise ConfigError(f"{where}: 'matcher' must be a string (a tool name, a glob or a regex)")
    if not _GLOB_ONLY.fullmatch(matcher):
        try:
            re.compile(matcher)
        except re.error as e:
            raise ConfigError(f"{where}: the matcher {matcher!r} is not a valid regex: {e}",
                              hint="a glob such as fs_* or a regex such as fs_(write|edit)") from e
    timeout = entry.get("timeout", DEFAULT_HOOK_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_HOOK_TIMEOUT_S:
        raise ConfigError(f"{where}: 'timeout' must be seconds between 0 and {MAX_HOOK_TIMEOUT_S:g}")
    name = entry.get("name", "")
    return UserHookSpec(event, command, matcher, float(timeout), source, name if isinstance(name, str) else "")


def user_hooks_from_toml(text: str, source: str = HOOKS_FILE) -> list[UserHookSpec]:
    """The hooks of a hooks.toml text; a TOML error is a ConfigError naming the line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source} is not valid TOML: {e}", hint="fix the file, then grant it again") from e
    return parse_user_hooks(data, source)


# -- running one ---------------------------------------------------------------------------------------------
def hook_input(spec: UserHookSpec, call: HookCall, result: ToolResult | None = None) -> str:
    """The JSON a hook reads on stdin (Claude Code's names): the event, the tool, its input, and after the
    call its result. Strings longer than HOOK_VALUE_CHARS are cut, and the cut is said; when the whole is still
    over HOOK_INPUT_BYTES (many long strings), they are cut shorter until it fits."""
    return _hook_input(spec, call, result)[0]




def _hook_input(spec: UserHookSpec, call: HookCall, result: ToolResult | None) -> tuple[str, str]:
    longest = _longest(call.input)
    for limit in (HOOK_VALUE_CHARS, 4_000, 500, 50):
        body: dict[str, Any] = {"hook_event_name": spec.event, "tool_name": call.name,
                                "tool_input": _cut(call.input, limit), "session_id": call.session_id,
                                "call_id": call.call_id, "cwd": "/workspace"}
        if result is not None:
            body["tool_response"] = {"content": _cut(result.text_content, limit), "is_error": result.is_error}
        text = json.dumps(body, ensure_ascii=False)
        if len(text.encode()) <= HOOK_INPUT_BYTES:
            cut = f"a string of {longest:,} characters is cut to {limit:,}" if longest > limit else ""
            return text, cut
    body["tool_input"] = {"input_too_large": True}  # a call of thousands of fields: its name is what is left
    return json.dumps(body, ensure_ascii=False), f"the input is over {HOOK_INPUT_BYTES:,} bytes"


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_longest(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return 0


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"…[{len(value) - limit} more characters cut]"
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    return value


async def run_user_hook(spec: UserHookSpec, sandbox: Sandbox | None, stdin: str) -> ExecResult:
    """Run the hook's command in the sandbox with `stdin`; no sandbox, or one that fails, is a SandboxError."""
    if sandbox is None:
        raise SandboxError(f"hook {spec.label!r} has no sandbox to run in")
    env = {"AGENT_DESK_HOOK_INPUT": stdin, "AGENT_DESK_HOOK_COMMAND": spec.command,
           "AGENT_DESK_HOOK_EVENT": spec.event}
    async with asyncio.timeout(spec.timeout_s + 5):  # the sandbox's own timeout first; this one if it hangs
        return await sandbox.exec(["sh", "-c", _WRAPPER], env=env, timeout=spec.timeout_s, output_limit=65_536)


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What a hook's run said: deny (with why), ask, or a note; `failed` when it did not run through."""

    decision: str  # "go", "deny", "ask"
    text: str = ""
    failed: bool = False


def read_answer(spec: UserHookSpec, res: ExecResult) -> HookAnswer:
    """Exit 2 or a JSON decision deny/block: deny, the reason from stderr or the JSON; exit 0: go on, with its
    stdout as a note; a timeout or another exit code: failed."""
    out, err = res.stdout.strip(), res.stderr.strip()
    if res.timed_out:
        return HookAnswer("deny", f"hook {spec.label!r} timed out after {spec.timeout_s:g} s", failed=True)
    if res.exit_code == DENY_EXIT_CODE:
        return HookAnswer("deny", _short(err or out or "the hook exited with code 2"))
    if res.exit_code != 0:
        why = _short(err or out or "no output")
        return HookAnswer("deny", f"hook {spec.label!r} failed with exit code {res.exit_code}: {why}", failed=True)
    return _json_answer(out) or HookAnswer("go", _short(out))


def _json_answer(out: str) -> HookAnswer | None:
    if not out.startswith("{"):
        return None
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    specific = data.get("hookSpecificOutput") if isinstance(data.get("hookSpecificOutput"), dict) else {}
    decision = str(data.get("decision") or specific.get("permissionDecision") or "").lower()
    reason = data.get("reason") or specific.get("permissionDecisionReason") or ""
    context = data.get("additionalContext") or specific.get("additionalContext") or ""
    text = _short(str(reason or context or ""))
    if decision in ("deny", "block"):
        return HookAnswer("deny", text or "denied by the hook")
    if decision == "ask":
        return HookAnswer("ask", text or "the hook asks")
    return HookAnswer("go", text)


def _short(text: str) -> str:
    return text if len(text) <= HOOK_NOTE_CHARS else text[:HOOK_NOTE_CHARS] + "…"


SandboxGetter = Callable[[str], "Sandbox | None"]  # the session's sandbox (a mode's container), by its id


class UserPreHook:
    """A PreToolUse hook: deny (exit 2, a JSON deny), ask, or a note in the trail; fails closed."""

    own_deadline = True  # its timeout is its own, not the chain's judging deadline

    def __init__(self, spec: UserHookSpec, sandbox: SandboxGetter) -> None:
        self.spec, self._sandbox = spec, sandbox
        self.name = f"user:{spec.label}"

    async def __call__(self, call: HookCall) -> PreHookResult | None:
        if not self.spec.matches(call.name):
            return None
        stdin, cut = _hook_input(self.spec, call, None)
        if cut:  # a deny hook judging part of the input could pass what it exists to refuse
            return PreHookResult.deny(f"hook {self.spec.label!r} cannot see the whole input ({cut}), so the call "
                                      "is denied (fail closed: the call did not run)")
        try:
            res = await run_user_hook(self.spec, self._sandbox(call.session_id), stdin)
        except TimeoutError:
            return PreHookResult.deny(f"hook {self.spec.label!r} did not answer in {self.spec.timeout_s:g} s "
                                      "(fail closed: the call did not run)")
        answer = read_answer(self.spec, res)
        if answer.decision == "deny":
            closed = " (fail closed: the call did not run)" if answer.failed else ""
            return PreHookResult.deny(answer.text + closed)
        if answer.decision == "ask":
            return PreHookResult.ask(answer.text, risk=Risk.MEDIUM)
        return PreHookResult.note(answer.text) if answer.text else None


class UserPostHook:
    """A PostToolUse hook: its stdout is added to the result; a deny marks the result an error with its
    reason; a failure is added to the result and the trail, and the result is otherwise kept (fail open)."""

    def __init__(self, spec: UserHookSpec, sandbox: SandboxGetter) -> None:
        self.spec, self._sandbox = spec, sandbox
        self.name = f"user:{spec.label}"

    async def __call__(self, call: HookCall, result: ToolResult) -> PostHookResult | None:
        if not self.spec.matches(call.name):
            return None
        try:
            res = await run_user_hook(self.spec, self._sandbox(call.session_id), hook_input(self.spec, call, result))
            answer = read_answer(self.spec, res)
        except (TimeoutError, SandboxError) as e:
            answer = HookAnswer("go", f"hook {self.spec.label!r} failed: {e or 'no answer in time'}", failed=True)
        if not answer.text:
            return None
        blocked = answer.decision == "deny" and not answer.failed
        label = "failed" if answer.failed else ("blocked" if blocked else "says")
        notes = [*result.details.get("hook_notes", []), {"hook": self.spec.label, label: answer.text}]
        amended = replace(result, content=[*result.content, TextBlock(f"\n[hook {self.spec.label} {label}] "
                                                                      f"{answer.text}")],
                          details={**result.details, "hook_notes": notes},
                          is_error=result.is_error or blocked)
        return PostHookResult.update(amended, f"{label}: {answer.text}")


def user_hook_chain(specs: list[UserHookSpec], sandbox: SandboxGetter) -> HookChain:
    """The chain of the person's hooks, in the order configured (the settings' first, then the project's)."""
    return HookChain(pre=[UserPreHook(s, sandbox) for s in specs if s.event == "PreToolUse"],
                     post=[UserPostHook(s, sandbox) for s in specs if s.event == "PostToolUse"])
