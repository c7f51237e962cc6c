"""The executor: runs each tool call through the pipeline of DESIGN.md and records every step.

exists? -> valid input? -> policy -> pre hooks -> approval -> run (timeout, abort) -> post hooks -> result
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._approvals import Allow, ApprovalDecision, ApprovalScope, Deny
from ._bus import EventBus
from ._errors import AgentDeskError, StoreError, ToolInputError
from ._events import (
    PermissionDecided,
    PermissionRequired,
    StateChanged,
    ToolEnd,
    ToolError,
    ToolExecuted,
    ToolStart,
    ToolUpdate,
)
from ._hooks import HookCall, HookChain, PostAction, PreAction
from ._policy import Action, PermissionPolicy, PolicyDecision, Rule, ToolFacts, suggest_rule
from ._record import AuditEntry, Outcome, Provenance, ToolCallRecord, ToolCallState
from ._registry import ToolRegistry
from ._store import RecordStore
from ._tool import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from ._sandbox import Sandbox

log = logging.getLogger(__name__)
S = ToolCallState
DEFAULT_TOOL_TIMEOUT_S = 120.0
SKIPPED_AFTER_DENIAL = "skipped after a denial"
SEALED_MESSAGE = (
    "This tool call was interrupted when the session ended and never reported a result. "
    "It may have had side effects (files written, processes started): check the workspace "
    "before you retry it."
)


@dataclass(slots=True)
class ToolCall:
    """One tool_use block as the model sent it."""

    id: str
    name: str
    input: dict[str, Any] | None
    raw_input: str = ""
    parse_error: str | None = None


@dataclass(slots=True)
class RunContext:
    """Per-session things every call of the session shares."""

    session_id: str
    project_id: str = ""
    sandbox: Sandbox | None = None
    state: dict[str, Any] = field(default_factory=dict)
    abort: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True)
class SealReport:
    sealed: list[ToolCallRecord] = field(default_factory=list)
    reoffered: list[ToolCallRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Batch:
    denied_by_user: bool = False
    waiting: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Pending:
    record: ToolCallRecord
    future: asyncio.Future[ApprovalDecision]
    batch: _Batch | None


def tool_result_block(record: ToolCallRecord) -> dict[str, Any]:
    """The Messages-API tool_result for a terminal record."""
    result = record.result or {}
    content = result.get("content") or [
        {"type": "text", "text": json.dumps({"ok": False, "error": record.error or "no result"})}
    ]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": record.id, "content": content}
    if record.is_error:
        block["is_error"] = True
    return block


def _validation_message(tool: Tool, exc: ValidationError) -> tuple[str, list[str]]:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(input)"
        problems.append(f"field `{loc}`: {err.get('msg')}")
    required = tool.input_schema().get("required", [])
    recs = [f"Fix the input of {tool.name}: " + "; ".join(problems)]
    if required:
        recs.append(f"{tool.name} requires: {', '.join(required)}")
    return "invalid input for " + tool.name + ": " + "; ".join(problems), recs


class Executor:
    """Runs batches of tool calls; the only place where records change state."""

    def __init__(
        self,
        registry: ToolRegistry,
        policy: PermissionPolicy,
        *,
        bus: EventBus,
        store: RecordStore,
        hooks: HookChain | None = None,
        max_parallel: int = 4,
        approval_timeout_s: float | None = None,
        default_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.bus = bus
        self.store = store
        self.hooks = hooks or HookChain()
        self.max_parallel = max(1, max_parallel)
        self.approval_timeout_s = approval_timeout_s
        self.default_timeout_s = default_timeout_s
        self._pending: dict[str, _Pending] = {}
        # A new record's PENDING entry rides along with its next transition (one commit, not two);
        # its events are published once both are durable.
        self._unsaved: dict[str, tuple[AuditEntry, list[Any]]] = {}
        self._project_rule_writer: Any = None  # set by the app: callable(Rule) persisting an "always" rule

    # -- public API ---------------------------------------------------------------------------------
    async def run_batch(self, calls: Sequence[ToolCall], run: RunContext) -> list[ToolCallRecord]:
        """Run the model's calls: consecutive read-only calls in parallel, writes as barriers."""
        batch = _Batch()
        results: list[ToolCallRecord | None] = [None] * len(calls)
        sem = asyncio.Semaphore(self.max_parallel)

        async def one(i: int, call: ToolCall) -> None:
            async with sem:
                results[i] = await self._run_call(call, run, batch, i)

        i = 0
        while i < len(calls):
            if self._is_read_only(calls[i]):
                j = i
                while j < len(calls) and self._is_read_only(calls[j]):
                    j += 1
                await asyncio.gather(*(one(k, calls[k]) for k in range(i, j)))
                i = j
            else:
                results[i] = await self._run_call(calls[i], run, batch, i)
                i += 1
        return [r for r in results if r is not None]

    def decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer a pending approval. Calls wait per id, so answers may come in any order."""
        pending = self._pending.get(call_id)
        if pending is None or pending.future.done():
            raise AgentDeskError(f"no tool call {call_id} is waiting for approval")
        pending.future.set_result(decision)

    def pending(self) -> list[ToolCallRecord]:
        return [p.record for p in self._pending.values() if not p.future.done()]

    async def seal_open(self, session_id: str) -> SealReport:
        """On reopen: calls that may have run are SEALED; calls that were waiting are offered again."""
        report = SealReport()
        open_states = [S.PENDING, S.APPROVED, S.EXECUTING, S.APPROVAL_REQUIRED]
        for record in await self.store.session_records(session_id, open_states):
            if record.state is S.APPROVAL_REQUIRED:
                if record.id not in self._pending:
                    self._register_pending(record, None)
                    self.bus.publish(self._permission_event(record))
                report.reoffered.append(record)
                continue
            body = {"ok": False, "error": SEALED_MESSAGE, "_autoSealed": True, "state_when_sealed": record.state.value}
            record.result = ToolResult.error(SEALED_MESSAGE).to_dict()
            record.result["content"] = [{"type": "text", "text": json.dumps(body)}]
            record.error = SEALED_MESSAGE
            record.is_error = True
            await self._move(record, S.SEALED, actor="system", note="session reopened", outcome=Outcome.SEALED)
            self.bus.publish(
                ToolEnd(session_id=record.session_id, call_id=record.id, name=record.name,
                        state=record.state.value, outcome=Outcome.SEALED.value, is_error=True,
                        summary="sealed on reopen")
            )
            report.sealed.append(record)
        return report

    async def resume_approvals(self, records: Sequence[ToolCallRecord], run: RunContext) -> list[ToolCallRecord]:
        """Wait for the decisions of re-offered calls, then run the allowed ones, in order."""
        batch = _Batch()
        for record in records:
            pending = self._pending.get(record.id) or self._register_pending(record, batch)
            pending.batch = batch
            batch.waiting.add(record.id)  # a denial of one skips the others, as in a live batch
        out = []
        for record in records:
            tool = self.registry.find(record.name)
            if tool is None:
                await self._fail(record, f"unknown tool {record.name!r}", Outcome.ERROR, actor="system")
            else:
                await self._await_and_run(record, tool, run, batch)
            out.append(record)
        return out

    def set_rule_writer(self, writer: Any) -> None:
        """`writer(rule)` persists an "always allow" rule to the project (the front end previews it)."""
        self._project_rule_writer = writer

    # -- the pipeline -------------------------------------------------------------------------------
    def _is_read_only(self, call: ToolCall) -> bool:
        tool = self.registry.find(call.name)
        return tool is None or tool.read_only

    async def _run_call(self, call: ToolCall, run: RunContext, batch: _Batch, index: int) -> ToolCallRecord:
        record = ToolCallRecord(
            id=call.id, name=call.name, input=call.input if call.input is not None else {},
            session_id=run.session_id, project_id=run.project_id, batch_index=index,
        )
        tool = self.registry.find(call.name)
        record.read_only = bool(tool and tool.read_only)
        record.risk = tool.risk if tool else "low"
        try:
            await self._create(record, call)
        except StoreError as e:
            return self._unrecorded_failure(record, e)
        try:
            await self._pipeline(record, call, tool, run, batch)
        except StoreError as e:
            # The audit log refused a write: the call stops here, visibly; what was written stays.
            self._unrecorded_failure(record, e)
        except asyncio.CancelledError:
            if not record.terminal:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._fail(record, "cancelled", Outcome.CANCELLED, actor="system"))
            raise
        finally:
            self._unsaved.pop(record.id, None)
        return record

    def _unrecorded_failure(self, record: ToolCallRecord, exc: StoreError) -> ToolCallRecord:
        msg = f"the audit store could not record this call, so it was stopped: {exc}"
        if not record.terminal:
            record.state, record.outcome = S.FAILED, Outcome.ERROR
        record.error, record.is_error = msg, True
        record.result = ToolResult.error(msg, ["Retry once the audit database is writable again."]).to_dict()
        self.bus.publish(ToolError(session_id=record.session_id, call_id=record.id, name=record.name, error=msg))
        return record

    async def _pipeline(
        self, record: ToolCallRecord, call: ToolCall, tool: Tool | None, run: RunContext, batch: _Batch
    ) -> None:
        if tool is None:
            close = difflib.get_close_matches(call.name, self.registry.names, n=3)
            recs = [f"Did you mean {', '.join(close)}?"] if close else []
            recs.append(f"Available tools: {', '.join(self.registry.names)}")
            await self._fail(record, f"unknown tool {call.name!r}", Outcome.ERROR, actor="executor", recs=recs)
            return
        if call.parse_error is not None or call.input is None:
            await self._fail(
                record,
                f"the input of {tool.name} is not valid JSON: {call.parse_error or 'missing'}",
                Outcome.ERROR, actor="executor",
                recs=[f"Send the input as a JSON object matching the schema of {tool.name}."],
            )
            return
        if batch.denied_by_user:
            await self._deny(record, SKIPPED_AFTER_DENIAL, Outcome.USER, actor="executor")
            return
        args = await self._validate(record, tool, record.input, run)
        if args is None:
            return
        # policy
        decision = self.policy.resolve_ask(
            self.policy.evaluate(
                ToolFacts(tool.name, tool.group, tool.read_only), record.input, session_id=run.session_id
            )
        )
        record.provenance.append(decision.provenance)
        if decision.action is Action.DENY:
            await self._deny(record, f"denied by policy: {decision.reason}", Outcome.POLICY, actor="policy",
                             data={"provenance": decision.provenance.to_dict()})
            return
        ask_reason = decision.reason if decision.action is Action.ASK else ""
        risk = _max_risk(record.risk, decision.risk) if decision.action is Action.ASK else record.risk
        meta: dict[str, Any] = {}
        # pre hooks
        hook_call = HookCall(record.id, record.session_id, tool.name, record.input, tool.read_only)
        for hook in self.hooks.pre:
            name = getattr(hook, "name", type(hook).__name__)
            t0 = time.perf_counter()
            try:
                res = await hook(hook_call)
            except Exception as e:
                prov = Provenance("hook", name, decision="deny", elapsed_ms=(time.perf_counter() - t0) * 1000)
                record.provenance.append(prov)
                await self._deny(record, f"pre hook {name!r} raised {type(e).__name__}: {e}", Outcome.HOOK,
                                 actor=f"hook:{name}", data={"provenance": prov.to_dict()})
                return
            if res is None or res.action is PreAction.CONTINUE:
                continue
            prov = Provenance("hook", name, decision=res.action.value, elapsed_ms=(time.perf_counter() - t0) * 1000)
            record.provenance.append(prov)
            if res.action is PreAction.DENY:
                if res.result is not None:
                    record.result = res.result.to_dict()
                await self._deny(record, f"denied by hook {name}: {res.reason}", Outcome.HOOK,
                                 actor=f"hook:{name}", data={"provenance": prov.to_dict()})
                return
            if res.action is PreAction.ASK:
                if decision.action is not Action.ASK:
                    asked = PolicyDecision(Action.ASK, prov, res.reason, res.risk or "medium")
                    resolved = self.policy.resolve_ask(asked)
                    if resolved.action is Action.DENY:
                        await self._deny(record, resolved.reason, Outcome.POLICY, actor="policy",
                                         data={"provenance": resolved.provenance.to_dict()})
                        return
                ask_reason = "; ".join(x for x in (ask_reason, f"{name}: {res.reason}") if x)
                risk = _max_risk(risk, res.risk or "medium")
                meta.update(res.meta)
                meta.setdefault("hooks", []).append(name)
            elif res.action is PreAction.RESULT and res.result is not None:
                await self._move(record, S.EXECUTING, actor=f"hook:{name}", note=f"short-circuited: {res.reason}")
                await self._finish(record, res.result, hook_call, run, ran=False)
                return
            elif res.action is PreAction.REWRITE and res.input is not None:
                original = record.input
                args = await self._validate(record, tool, res.input, run)
                if args is None:
                    return
                record.input = res.input
                hook_call = HookCall(record.id, record.session_id, tool.name, record.input, tool.read_only)
                record.trail.append(
                    AuditEntry(record.id, record.state, time.time(), f"hook:{name}", f"input rewritten: {res.reason}",
                               {"original_input": original, "input": res.input})
                )
                await self._persist(record, record.trail[-1])
        record.risk = risk
        if ask_reason:
            record.approval.required = True
            record.approval.meta = {"reason": ask_reason, **meta}
            if self.approval_timeout_s is not None:
                record.approval.expires_at = time.time() + self.approval_timeout_s
            self._register_pending(record, batch)
            await self._move(record, S.APPROVAL_REQUIRED, actor="policy", note=ask_reason,
                             data={"risk": risk, "provenance": [p.to_dict() for p in record.provenance]})
            self.bus.publish(self._permission_event(record))
            await self._await_and_run(record, tool, run, batch)
            return
        await self._execute(record, tool, args, run)

    async def _validate(self, record: ToolCallRecord, tool: Tool, raw: dict[str, Any], run: RunContext) -> Any:
        try:
            args = tool.parse(raw)
            await tool.validate(args, self._context(record, tool, run, args))
            return args
        except ValidationError as e:
            msg, recs = _validation_message(tool, e)
            await self._fail(record, msg, Outcome.ERROR, actor="executor", recs=recs)
        except ToolInputError as e:
            await self._fail(record, f"invalid input for {tool.name}: {e}", Outcome.ERROR, actor="executor",
                             recs=[e.hint] if e.hint else [])
        return None

    def _register_pending(self, record: ToolCallRecord, batch: _Batch | None) -> _Pending:
        fut: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        pending = _Pending(record, fut, batch)
        self._pending[record.id] = pending
        if batch is not None:
            batch.waiting.add(record.id)
        return pending

    def _permission_event(self, record: ToolCallRecord) -> PermissionRequired:
        return PermissionRequired(
            session_id=record.session_id, call_id=record.id, name=record.name, input=record.input,
            risk=record.risk, reason=str(record.approval.meta.get("reason", "")),
            provenance=[p.to_dict() for p in record.provenance], meta=record.approval.meta,
            expires_at=record.approval.expires_at,
        )

    async def _await_and_run(self, record: ToolCallRecord, tool: Tool, run: RunContext, batch: _Batch) -> None:
        pending = self._pending[record.id]
        timeout = None
        if record.approval.expires_at is not None:
            timeout = max(0.0, record.approval.expires_at - time.time())
        abort_wait = asyncio.ensure_future(run.abort.wait())
        try:
            done, _ = await asyncio.wait({pending.future, abort_wait}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            abort_wait.cancel()
            self._pending.pop(record.id, None)
            batch.waiting.discard(record.id)
        if pending.future not in done:
            pending.future.cancel()
            if run.abort.is_set():
                await self._fail(record, "cancelled while waiting for approval", Outcome.CANCELLED, actor="user")
            else:
                await self._deny(record, "the approval expired", Outcome.EXPIRED, actor="system")
            return
        decision = pending.future.result()
        t_decided = time.time()
        ap = record.approval
        ap.decision = decision.kind
        ap.decided_by, ap.decided_at, ap.note = decision.by, t_decided, decision.note
        scope = decision.scope if isinstance(decision, Allow) else ApprovalScope.ONCE
        prov = Provenance("user", decision.by, source=scope, decision=ap.decision,
                          elapsed_ms=(t_decided - (record.updated_at or t_decided)) * 1000)
        record.provenance.append(prov)
        if isinstance(decision, Deny):
            batch.denied_by_user = True
            note = decision.note or "denied by the user"
            await self._deny(record, f"denied by {decision.by}: {note}", Outcome.USER, actor=decision.by,
                             data={"provenance": prov.to_dict()})
            self.bus.publish(PermissionDecided(session_id=record.session_id, call_id=record.id, decision="deny",
                                               decided_by=decision.by, note=decision.note))
            # The rest of the batch does not run: calls still waiting are skipped too.
            for other_id in list(batch.waiting):
                other = self._pending.get(other_id)
                if other and not other.future.done():
                    other.future.set_result(Deny(note=SKIPPED_AFTER_DENIAL, by="executor"))
            return
        data: dict[str, Any] = {"provenance": prov.to_dict(), "scope": str(scope)}
        if decision.edited_input is not None and decision.edited_input != record.input:
            original = record.input
            args = await self._validate(record, tool, decision.edited_input, run)
            if args is None:
                return
            ap.edited_input = decision.edited_input
            data.update(original_input=original, edited_input=decision.edited_input)
            record.input = decision.edited_input
        else:
            args = tool.parse(record.input)
        if scope in (ApprovalScope.SESSION, ApprovalScope.ALWAYS):
            rule = (Rule.parse(decision.rule, Action.ALLOW, "session") if decision.rule
                    else suggest_rule(tool.name, record.input))
            if scope is ApprovalScope.SESSION:
                self.policy.add_rule(
                    Rule(Action.ALLOW, rule.target, rule.pattern, "session"), session_id=record.session_id
                )
            else:
                self.policy.add_rule(Rule(Action.ALLOW, rule.target, rule.pattern, "project"))
                if self._project_rule_writer is not None:
                    self._project_rule_writer(rule)
            data["rule_added"] = rule.text
        await self._move(record, S.APPROVED, actor=decision.by, note=decision.note, data=data)
        self.bus.publish(PermissionDecided(session_id=record.session_id, call_id=record.id, decision="allow",
                                           decided_by=decision.by, note=decision.note,
                                           edited=ap.edited_input is not None))
        if batch.denied_by_user:
            await self._fail(record, SKIPPED_AFTER_DENIAL, Outcome.CANCELLED, actor="executor")
            return
        await self._execute(record, tool, args, run)

    def _context(self, record: ToolCallRecord, tool: Tool, run: RunContext, args: Any = None) -> ToolContext:
        bus, sid, cid = self.bus, record.session_id, record.id

        def update(text: str, stream: str = "stdout") -> None:
            bus.publish(ToolUpdate(session_id=sid, call_id=cid, stream=stream, text=text))

        return ToolContext(call_id=cid, session_id=sid, sandbox=run.sandbox, abort=run.abort, state=run.state,
                           project_id=run.project_id, _update=update)

    async def _execute(self, record: ToolCallRecord, tool: Tool, args: Any, run: RunContext) -> None:
        if run.abort.is_set():
            await self._fail(record, "cancelled before it ran", Outcome.CANCELLED, actor="user")
            return
        if run.sandbox is not None:
            with contextlib.suppress(Exception):
                record.sandbox = run.sandbox.describe().to_dict()
        where = {"sandbox": record.sandbox} if record.sandbox else None
        await self._move(record, S.EXECUTING, actor="executor", data=where)
        ctx = self._context(record, tool, run, args)
        timeout = tool.timeout_for(args) if hasattr(tool, "timeout_for") else tool.timeout_s
        timeout = timeout or self.default_timeout_s
        ctx.deadline = time.monotonic() + timeout
        task = asyncio.ensure_future(tool.run(args, ctx))
        abort_wait = asyncio.ensure_future(run.abort.wait())
        hook_call = HookCall(record.id, record.session_id, tool.name, record.input, tool.read_only)
        try:
            done, _ = await asyncio.wait({task, abort_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            abort_wait.cancel()
            raise
        abort_wait.cancel()
        if task not in done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            if run.abort.is_set():
                await self._fail(record, "cancelled by the user", Outcome.CANCELLED, actor="user")
            else:
                await self._fail(record, f"{tool.name} timed out after {timeout:g} s", Outcome.TIMEOUT,
                                 actor="executor",
                                 recs=["Use a shorter command, or a larger timeout if the tool takes one."])
            return
        try:
            out = task.result()
        except AgentDeskError as e:
            await self._fail(record, f"{tool.name} failed: {e}", Outcome.ERROR, actor="executor",
                             recs=[e.hint] if e.hint else [])
            return
        except Exception as e:
            await self._fail(record, f"{tool.name} raised {type(e).__name__}: {e}", Outcome.ERROR, actor="executor",
                             recs=["Check the input, or try another approach."])
            return
        result = out if isinstance(out, ToolResult) else ToolResult.text(str(out))
        await self._finish(record, result, hook_call, run, ran=True)

    async def _finish(self, record: ToolCallRecord, result: ToolResult, hook_call: HookCall, run: RunContext,
                      *, ran: bool) -> None:
        for hook in self.hooks.post:
            name = getattr(hook, "name", type(hook).__name__)
            try:
                res = await hook(hook_call, result)
            except Exception as e:
                # Fail closed: a broken redaction hook must not let the raw output through.
                await self._fail(record, f"post hook {name!r} raised {type(e).__name__}: {e}; the output was withheld",
                                 Outcome.ERROR, actor=f"hook:{name}")
                return
            if res is not None and res.action is not PostAction.KEEP and res.result is not None:
                result = res.result
                record.trail.append(AuditEntry(record.id, record.state, time.time(), f"hook:{name}",
                                               f"{res.action.value}: {res.note}".strip(": ")))
                await self._persist(record, record.trail[-1])
        record.result = result.to_dict()
        record.is_error = result.is_error
        if result.is_error:
            record.error = result.text_content[:2000]
            await self._move(record, S.FAILED, actor="executor", note="the tool reported an error",
                             outcome=Outcome.ERROR)
        else:
            await self._move(record, S.COMPLETED, actor="executor", outcome=Outcome.OK)
        self._publish_end(record)

    # -- transitions --------------------------------------------------------------------------------
    async def _create(self, record: ToolCallRecord, call: ToolCall) -> None:
        entry = AuditEntry(record.id, S.PENDING, record.created_at, "model", "tool_use received",
                           {"raw_input": call.raw_input} if call.parse_error else {})
        record.trail.append(entry)
        events = [
            ToolStart(session_id=record.session_id, call_id=record.id, name=record.name,
                      input=record.input, partial=False),
            StateChanged(session_id=record.session_id, call_id=record.id, name=record.name,
                         state=S.PENDING.value, actor="model"),
        ]
        self._unsaved[record.id] = (entry, events)

    async def _persist(self, record: ToolCallRecord, entry: AuditEntry) -> None:
        """Make `entry` (and a deferred PENDING entry) durable, then publish what waited for it."""
        deferred = self._unsaved.pop(record.id, None)
        try:
            if deferred is None:
                await self.store.save_transition(record, entry)
            else:
                # queued back to back, they land in the same group commit
                await asyncio.gather(self.store.save_transition(record, deferred[0]),
                                     self.store.save_transition(record, entry))
        except BaseException:
            if deferred is not None:
                self._unsaved[record.id] = deferred
            raise
        if deferred is not None:
            for event in deferred[1]:
                self.bus.publish(event)

    async def _move(self, record: ToolCallRecord, to: ToolCallState, *, actor: str, note: str = "",
                    outcome: Outcome | None = None, data: dict[str, Any] | None = None) -> None:
        """Transition, make it durable, then publish. A failed write undoes the transition in memory."""
        snapshot = (record.state, record.outcome, record.updated_at, record.started_at,
                    record.completed_at, record.duration_ms)
        previous = record.state
        entry = record.transition(to, actor=actor, note=note, outcome=outcome, data=data)
        try:
            await self._persist(record, entry)
        except BaseException:
            (record.state, record.outcome, record.updated_at, record.started_at,
             record.completed_at, record.duration_ms) = snapshot
            record.trail.remove(entry)
            raise
        self.bus.publish(StateChanged(session_id=record.session_id, call_id=record.id, name=record.name,
                                      state=to.value, previous=previous.value, actor=actor, note=note))

    async def _fail(self, record: ToolCallRecord, error: str, outcome: Outcome, *, actor: str,
                    recs: list[str] | None = None) -> None:
        record.error, record.is_error = error, True
        if record.result is None or not record.result.get("is_error"):
            record.result = ToolResult.error(error, recs).to_dict()
        await self._move(record, S.FAILED, actor=actor, note=error, outcome=outcome)
        self.bus.publish(ToolError(session_id=record.session_id, call_id=record.id, name=record.name, error=error))
        self._publish_end(record)

    async def _deny(self, record: ToolCallRecord, note: str, outcome: Outcome, *, actor: str,
                    data: dict[str, Any] | None = None) -> None:
        record.error, record.is_error = note, True
        if record.result is None:
            recs = ["Do not retry the same call; ask the user or take another approach."]
            record.result = ToolResult.error(note, recs).to_dict()
        await self._move(record, S.DENIED, actor=actor, note=note, outcome=outcome, data=data)
        self._publish_end(record)

    def _publish_end(self, record: ToolCallRecord) -> None:
        tool = self.registry.find(record.name)
        summary = tool.summarize(record.input) if tool else record.name
        self.bus.publish(ToolEnd(session_id=record.session_id, call_id=record.id, name=record.name,
                                 state=record.state.value, outcome=record.outcome.value if record.outcome else None,
                                 is_error=record.is_error, duration_ms=record.duration_ms, summary=summary))
        self.bus.publish(ToolExecuted(session_id=record.session_id, call_id=record.id, name=record.name,
                                      state=record.state.value,
                                      outcome=record.outcome.value if record.outcome else None,
                                      duration_ms=record.duration_ms, sandbox=record.sandbox))


_RISKS = ("low", "medium", "high")


def _max_risk(a: str, b: str) -> str:
    return max(a, b, key=lambda r: _RISKS.index(r) if r in _RISKS else 0)
