"""What every step of a tool call shares: the session's `RunContext` and the call's `CallJob` on its way
through the executor's pipeline (judged by `_judge.py`, run with the context of `_tool_context.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._approvals import Allow, Batch
from ._hooks import HookCall
from ._messages import ToolCall
from ._record import Provenance, Risk, ToolCallRecord
from ._redaction import StreamRedactor
from ._tool import Tool
from .policy import Policy

if TYPE_CHECKING:
    from ._breakpoints import Breakpoint
    from ._errors import StoreError
    from ._sandbox import Sandbox
    from ._subagents import Subagents


@dataclass(slots=True)
class RunContext:
    """Per-session things every call of the session shares."""

    session_id: str
    """The session whose calls these are."""
    project_id: str = ""
    sandbox: Sandbox | None = None
    """Where the session's tools run; None: no tool that needs one can run."""
    state: dict[str, Any] = field(default_factory=dict)
    """A tool's own keys, kept for the session (the fs tools' read hashes, the todo list, bash processes)."""
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    store_error: StoreError | None = None
    """The first write the audit store refused in this run: the agent ends the turn on it (taken, then cleared)."""
    abandoned: bool = False
    """The app quits without stopping the run (AgentSession.abandon): a cancelled call is left as it stands,
    for the next start to seal (running) or offer again (waiting for approval)."""
    policy: Policy | None = None
    """A sub-agent's or a template's own policy, never wider than the executor's (see core/_templates.py);
    None: the executor's."""
    offered: Callable[[str], bool] | None = None
    """Whether the agent was offered a tool of this name (None: any registered one)."""
    labels: dict[str, Any] = field(default_factory=dict)
    """What the session's approvals carry for the inbox (the sub-agent's name, its parent call, the template)."""
    subagents: Subagents | None = None
    """The session's sub-agents, for task_run; None: this session cannot start any."""
    host_changed: set[str] = field(default_factory=set)
    """The workspace paths (/workspace/...) changed on the host since a tool last read or wrote them."""
    breakpoints: list[Breakpoint] = field(default_factory=list)
    """Where the person stops the session before a call runs (see core/_breakpoints.py)."""


@dataclass(slots=True)
class FinalHold:
    """The calls of a batch's last group: the one that ends last (the others have ended) holds its final
    transition in `held` (HeldFinal), to be written with the tool-result message in one commit."""

    held: list[Any]
    calls: int  # in the group
    ended: set[str] = field(default_factory=set)  # the ids of its records that ended (or are ending)

    def take(self, record_id: str) -> list[Any] | None:
        """Where to hold the final transition of a call ending now: only the group's last call to end holds."""
        self.ended.add(record_id)
        return self.held if len(self.ended) == self.calls else None


@dataclass(slots=True)
class CallJob:
    """One call on its way through the pipeline, and what the steps so far found."""

    record: ToolCallRecord
    call: ToolCall
    run: RunContext
    batch: Batch
    tool: Tool | None
    args: Any = None
    policy_asked: bool = False
    asks: list[str] = field(default_factory=list)  # why a person must approve: the policy's, then hooks'
    risk: Risk = Risk.LOW
    meta: dict[str, Any] = field(default_factory=dict)
    original_input: dict[str, Any] | None = None  # the model's input, once a person edited it
    approving: tuple[Allow, Provenance] | None = None  # the allow of an edit, while the edit is judged
    raw_input: dict[str, Any] | None = None  # the input unredacted: judged and run, never stored
    streams: dict[str, StreamRedactor] = field(default_factory=dict)  # streamed output, per stream
    approval_note: str = ""  # "yes, but...": a person's note with their allow, sent with the result
    emitted: int = 0  # custom events published by the running tool (ctx.emit)
    checkpoint: Any = None  # the workspace before it runs (a core.Checkpoint), when it may write
    checkpoint_after: Any = None  # and once it ended
    hold: FinalHold | None = None  # set for the batch's last group: see FinalHold

    @property
    def raw(self) -> dict[str, Any]:
        return self.raw_input if self.raw_input is not None else self.record.input

    def judge_afresh(self) -> None:
        """What the policy and the hooks said of an earlier input goes: an edit is judged on its own."""
        self.policy_asked, self.asks, self.meta = False, [], {}
        self.risk = Risk.of(self.known.risk)

    @property
    def known(self) -> Tool:
        assert self.tool is not None, "the pipeline checks the tool is known first"
        return self.tool

    @property
    def hook_call(self) -> HookCall:
        r = self.record
        return HookCall(r.id, r.session_id, self.known.name, self.raw, self.known.read_only)
