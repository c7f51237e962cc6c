"""What a session is opened with beside its wiring (store, bus, executor, tools, model, sandbox): its bounds,
its policy and tools when a template or a parent narrows them, its prompt, its children. A new feature adds a
field here, with its docstring, never a keyword of `AgentSession`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._compaction import CompactionSettings
from ._templates import AgentTemplate, TemplateCatalog

if TYPE_CHECKING:
    from ._llm import ModelClient
    from ._tool import Tool
    from .policy import Policy

DEFAULT_MAX_STEPS = 50


@dataclass(frozen=True, slots=True)
class SubagentLimits:
    """`max_depth`: a top session's children are depth 1, theirs 2. `max_children`: children one session
    may start while it is open. `max_running`: children of one session running at once."""

    max_depth: int = 2
    max_children: int = 8
    max_running: int = 2


@dataclass(slots=True)
class SubagentSetup:
    """What a runtime gives its sessions to start children with."""

    templates: TemplateCatalog = field(default_factory=TemplateCatalog)
    limits: SubagentLimits = field(default_factory=SubagentLimits)
    client_for: Callable[[str], ModelClient] | None = None  # a template's model -> a client for it
    prompt_extra: Callable[[AgentTemplate], str] | None = None  # e.g. the skills, for a template


@dataclass(slots=True)
class SessionSetup:
    """How one session runs; the defaults make a plain session of the executor's policy and all its tools."""

    max_steps: int = DEFAULT_MAX_STEPS
    """Model steps one turn may take before it stops."""
    mistake_limit: int = 5
    """Failed calls in a row, of any tools, after which the turn pauses; 0: no such pause."""
    more_tools: Callable[[], list[Tool]] | None = None
    """Tools that come and go during the session (an MCP server's, once it is ready), asked per request."""
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    """When and how the history is compacted."""
    policy: Policy | None = None
    """The session's own policy (a template's narrowing, a sub-agent's); None: the executor's."""
    restrict_tools: bool = False
    """Refuse a call of any tool the session was not offered (a template's or a sub-agent's run)."""
    system_extra: str = ""
    """Text added to the system prompt (a template's prompt, the skills, a sub-agent's brief)."""
    subagents: SubagentSetup | None = None
    """What the session starts sub-agents with (templates, bounds, model clients); None: it cannot."""
    depth: int = 0
    """How deep the session is nested: a top session is 0, its sub-agents 1."""
    labels: dict[str, Any] = field(default_factory=dict)
    """What the session's approvals carry for the inbox (the template, the sub-agent's name, its parent call)."""
