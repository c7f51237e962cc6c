"""Sub-agents: a session hands a task to a child session made from a template, in the same sandbox, executor
and audit, under a policy never wider than its own. `Subagents` is what the `task_run` tool finds in its
context; the runtime gives each session a `SubagentSetup` (core/_session_setup.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._approvals import visible
from ._errors import AgentDeskError, ToolInputError
from ._events import SubagentFinished, SubagentStarted
from ._project import SessionInfo
from ._record import new_id
from ._session_setup import SessionSetup, SubagentSetup
from ._templates import AgentTemplate, NarrowedPolicy

if TYPE_CHECKING:
    from ._tool import Tool

log = logging.getLogger(__name__)

TASK_TOOL = "task_run"
STOP_GRACE_S = 10.0  # how long a stopped child may take to close its history before it is left
# What a child is never given, whatever its template says: leaving plan mode is the parent's and the person's.
CHILD_FORBIDDEN_TOOLS = frozenset({"exit_plan_mode"})
TASK_EXCERPT_CHARS = 120  # how much of a child's task its cards show


@dataclass(slots=True)
class ChildAnswer:
    """How a child's task ended: its final text, whether it finished, and its session."""

    text: str
    ok: bool
    reason: str
    message: str
    session_id: str
    steps: int
    name: str
    template: str


def child_label(template: str, number: int) -> str:
    """The name the person sees for a child: its template and its number in the session, set by the desk
    (a name the model picks could read "main session")."""
    return f"{template} {number}"


def task_excerpt(task: str) -> str:
    """The start of a child's task, on one line, as its cards show it."""
    line = " ".join(task.split())
    return line if len(line) <= TASK_EXCERPT_CHARS else line[:TASK_EXCERPT_CHARS - 1] + "…"


def asked_by(meta: Mapping[str, Any]) -> str:
    """Who asks, for a card of a child's call, question or plan: "the sub-agent explore 1 (template explore),
    task: …", from the labels the desk set; "" for a session's own."""
    label = meta.get("subagent")
    if not label:
        return ""
    template = f" (template {visible(str(meta['template']))})" if meta.get("template") else ""
    task = f", task: {visible(str(meta['task']))}" if meta.get("task") else ""
    return f"the sub-agent {visible(str(label))}{template}{task}"


def subagent_prompt(name: str, template: AgentTemplate, depth: int) -> str:
    """What a child is told of itself besides the desk's usual prompt."""
    lines = [
        f"You are the sub-agent {name!r} (template {template.name!r}, depth {depth}), started by another agent "
        "to do one task. You have your own context: the other agent sees only your final message, so end "
        "with a complete, self-contained answer. The person cannot answer questions from you.",
    ]
    if template.system_prompt:
        lines.append(template.system_prompt)
    return "\n".join(lines)


class Subagents:
    """The children of one session: started by `run`, bounded in number, depth and concurrency, each
    stopped with its parent."""

    def __init__(self, parent: Any, setup: SubagentSetup, depth: int = 0) -> None:
        self.parent = parent  # the AgentSession (its type builds the children: no import of _agent here)
        self.setup = setup
        self.depth = depth
        self.started = 0
        self.children: dict[str, Any] = {}  # child session id -> its AgentSession, while it runs
        self._running = asyncio.Semaphore(max(1, setup.limits.max_running))

    @property
    def may_delegate(self) -> bool:
        """Whether this session's children may start children of their own."""
        return self.depth + 1 < self.setup.limits.max_depth

    def check(self, template: str) -> AgentTemplate:
        """The template a new child would use; ToolInputError when a bound forbids another child."""
        limits = self.setup.limits
        if self.depth >= limits.max_depth:
            raise ToolInputError(f"sub-agents may not be nested deeper than {limits.max_depth}",
                                 hint="Do the task yourself.")
        if self.started >= limits.max_children:
            raise ToolInputError(f"this session has started its {limits.max_children} sub-agents already",
                                 hint="Do the rest yourself, or ask the person to raise subagent_max_children.")
        try:
            return self.setup.templates.get(template)
        except AgentDeskError as e:
            raise ToolInputError(str(e), hint=e.hint) from None

    async def run(self, *, template: str, task: str, name: str, parent_call_id: str) -> ChildAnswer:
        """Start a child for `task` and wait for its answer; a cancelled wait stops the child first."""
        tpl = self.check(template)
        self.started += 1
        # The desk names the child (template and number): the model's `name` is kept, never shown as its title.
        label = child_label(tpl.name, self.started)
        async with self._running:
            child = await self._open(tpl, label, task, parent_call_id, name.strip())
            sid = child.session.id
            self.children[sid] = child
            self.parent.bus.publish(SubagentStarted(
                session_id=self.parent.session.id, call_id=parent_call_id, child_session_id=sid, name=label,
                template=tpl.name, depth=self.depth + 1))
            try:
                result = await child.send(task)
            except asyncio.CancelledError:
                await self._stop(child)
                raise
            finally:
                self.children.pop(sid, None)
        self.parent.bus.publish(SubagentFinished(
            session_id=self.parent.session.id, call_id=parent_call_id, child_session_id=sid, name=label,
            reason=str(result.reason), steps=result.steps))
        return ChildAnswer(text=result.text, ok=result.ok, reason=str(result.reason), message=result.message,
                           session_id=sid, steps=result.steps, name=label, template=tpl.name)

    def stop(self) -> None:
        """Stop every running child (their parent is stopping)."""
        for child in list(self.children.values()):
            child.stop()

    async def _stop(self, child: Any) -> None:
        child.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.shield(child.wait())

    async def _open(self, tpl: AgentTemplate, label: str, task: str, parent_call_id: str, given: str) -> Any:
        parent = self.parent
        depth = self.depth + 1
        tools = self._tools(tpl, depth)
        client = parent.model_client
        if tpl.model and tpl.model != client.model and self.setup.client_for is not None:
            client = self.setup.client_for(tpl.model)
        excerpt = task_excerpt(parent.executor.redactor.redact(task))  # shown on cards and stored: no secrets
        meta = {"parent_session_id": parent.session.id, "parent_call_id": parent_call_id,
                "template": tpl.name, "subagent": label, "depth": depth, "task": excerpt}
        if given:  # kept for the record, never the child's title
            meta["name_given"] = given
        session = SessionInfo(id=new_id("ses_"), project_id=parent.project.id,
                              title=f"sub-agent {label}: {excerpt[:60]}", model=client.model, meta=meta)
        await parent.store.save_session(session)
        # The parent session's own mode (plan mode, or the mode a plan was approved into) is the child's too.
        policy = parent.policy
        if policy.mode_for(parent.session.id) is not policy.mode:
            policy.set_session_mode(session.id, policy.mode_for(parent.session.id))
        extra = [subagent_prompt(label, tpl, depth)]
        if self.setup.prompt_extra is not None:
            extra.append(self.setup.prompt_extra(tpl))
        setup = SessionSetup(
            max_steps=parent.max_steps, mistake_limit=parent.setup.mistake_limit,
            policy=NarrowedPolicy(parent.policy, tpl), restrict_tools=True,
            subagents=self.setup, depth=depth, system_extra="\n".join(x for x in extra if x),
            labels={k: meta[k] for k in ("subagent", "parent_session_id", "parent_call_id", "template", "task")},
        )
        child = type(parent)(
            store=parent.store, bus=parent.bus, executor=parent.executor, tools=tools, model_client=client,
            project=parent.project, sandbox=_child_sandbox(parent.sandbox, session.id, setup.policy),
            session=session, setup=setup,
        )
        child._run.breakpoints = parent._run.breakpoints  # the person's breakpoints stop the children too
        return child

    def _tools(self, tpl: AgentTemplate, depth: int) -> list[Tool]:
        """The parent's offered tools that the template admits; task_run only while deeper nesting is allowed;
        never exit_plan_mode (a child in plan mode stays there: only its parent's plan leaves it)."""
        nested_ok = depth < self.setup.limits.max_depth
        return [t for t in self.parent.offered_tools() if tpl.admits(t) and t.name not in CHILD_FORBIDDEN_TOOLS
                and (t.name != TASK_TOOL or nested_ok)]


def _child_sandbox(sandbox: Any, session_id: str, policy: Any) -> Any:
    """The child's own view of the parent's sandbox when it offers one (the runtime's: the child's mode, its
    template's included, picks its container), else the parent's sandbox."""
    for_session = getattr(sandbox, "for_session", None)
    return for_session(session_id, policy) if callable(for_session) else sandbox
