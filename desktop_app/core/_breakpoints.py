"""Breakpoints (Kode's setBreakpoint): a person stops the agent before a tool, a group of tools, the next
call that may write, or every call that reaches approval. A call at a breakpoint waits in APPROVAL_REQUIRED
like any call that asks, with the breakpoint as its reason, and the session is PAUSED (reason `breakpoint`)
until the person's word: Allow goes on, Deny stops the call. A breakpoint never lets a call through that would
not otherwise run."""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import ConfigError
from ._tool import Tool

WRITE = "@write"  # the next call not proven read-only (by the desk, not a tool's claim)
APPROVAL = "@approval"  # every call that reaches AWAITING_APPROVAL (something already asks about it)
_FORMS = ("a tool name (bash_run), a group (group:fs), @write (the next call that may write) or @approval (a call "
          "that needs approval)")


@dataclass(frozen=True, slots=True)
class Breakpoint:
    on: str
    once: bool = False  # @write is a one-shot: the next write, then it is gone

    def matches(self, tool: Tool, *, asking: bool = False) -> bool:
        """Whether the call of `tool` stops here; `asking`: something (the policy, a hook) asks about it already."""
        if self.on == WRITE:
            return not tool.trusted_read_only
        if self.on == APPROVAL:
            return asking
        return self.on in (tool.name, tool.group)

    def reason(self, tool: Tool) -> str:
        said = {WRITE: "the next call that may write", APPROVAL: "a call that needs approval"}.get(self.on, self.on)
        return f"breakpoint: before {tool.name} ({said}); allow to go on" if said != tool.name else (
            f"breakpoint: before {tool.name}; allow to go on")


def parse_breakpoint(spec: str) -> Breakpoint:
    """A breakpoint from what a person typed (`--break bash_run`, `group:fs` or `@write`)."""
    spec = spec.strip()
    if spec == WRITE:
        return Breakpoint(WRITE, once=True)
    if spec == APPROVAL:
        return Breakpoint(APPROVAL)
    if (spec.startswith("group:") and len(spec) > 6) or spec.replace("_", "").replace("-", "").isalnum():
        return Breakpoint(spec)
    raise ConfigError(f"{spec!r} is not a breakpoint", hint=f"give {_FORMS}")
