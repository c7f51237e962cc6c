"""The executor: schedules the model's tool calls and walks each along the pipeline of DESIGN.md.

known and parsed? -> valid input? -> policy (`_judge.py`) -> pre hooks -> dry run, approval (`_approval_gate.py`)
-> plan mode's last word (`_judge.py`) -> run, post hooks (`_tool_run.py`)
The pre hooks run as: the chain's own (built-in) -> the person's (`user_hooks`) -> the tool's own.
Records change state through the RecordWriter (`_recorder.py`); waiting calls live in `_approvals.py`; what a
call carries between the steps is its `CallJob` (`_run.py`). An input a person edits is judged again.
Secrets never reach the store or the bus from here: a record holds its input redacted (the raw input stays in
the call's `CallJob`, to judge and run it).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from . import _reasons as reasons
from ._approval_gate import ApprovalGate
from ._approvals import (
    Allow,
    ApprovalDecision,
    Batch,
    PendingApprovals,
    PendingQuestions,
    RuleWriter,
)
from ._bus import EventBus
from ._checkpoint_step import asked, checkpoint_before
from ._checkpoints import ShadowStore
from ._errors import StoreError, ToolInputError
from ._hooks import HookChain, HookStep, PreAction, redact_off_loop, redaction_first
from ._judge import DEFAULT_JUDGE_DEADLINE_S, MAX_RESOLVED_PATHS, Judge
from ._messages import ToolCall
from ._record import Outcome, Provenance, Risk, ToolCallRecord, ToolCallState, highest_risk
from ._recorder import HeldFinal, RecordWriter
from ._redaction import Redactor, holds_redaction
from ._registry import ToolRegistry
from ._run import CallJob, FinalHold, RunContext
from ._store import RecordStore
from ._tool import Tool
from ._tool_context import tool_context
from ._tool_run import DEFAULT_TOOL_TIMEOUT_S, ToolRunner
from .policy import Action, PermissionPolicy, PolicyDecision

LOST_SECRETS = reasons.LOST_SECRETS


@dataclass(slots=True)
class SealReport:
    sealed: list[ToolCallRecord] = field(default_factory=list)
    reoffered: list[ToolCallRecord] = field(default_factory=list)


def _validation_message(tool: Tool, exc: ValidationError) -> tuple[str, list[str]]:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(input)"
        problems.append(f"field `{loc}`: {err.get('msg')}")
    required = tool.input_schema().get("required", [])
    recs = [f"Fix the input of {tool.name}: " + "; ".join(problems)]
    if required:
        recs.append(f"{tool.name} requires: {', '.join(required)}")
    return reasons.invalid_input(tool.name, "; ".join(problems)), recs


class Executor:
    """Runs batches of tool calls. Records change state only through its RecordWriter, which its rooms share:
    the judge (policy, plan mode), the approval gate (dry run, the person's answer) and the tool runner."""

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
        judge_deadline_s: float = DEFAULT_JUDGE_DEADLINE_S,
        max_resolved_paths: int = MAX_RESOLVED_PATHS,
        redactor: Redactor | None = None,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.bus = bus
        self.store = store
        self.hooks, self.redactor = redaction_first(hooks or HookChain(), redactor)
        self.max_parallel = max(1, max_parallel)
        self.recorder = RecordWriter(store, bus, self._summary)
        self.judge = Judge(policy, self.recorder, self.redactor, deadline_s=judge_deadline_s,
                           max_resolved_paths=max_resolved_paths)
        self.approvals = PendingApprovals(bus, policy, timeout_s=approval_timeout_s)
        self.questions = PendingQuestions(bus, policy, timeout_s=approval_timeout_s)
        self.gate = ApprovalGate(bus, self.recorder, self.approvals, self.judge, self.redactor,
                                 person=self.questions, judge_edit=self._judge_edit)
        self.runner = ToolRunner(bus, self.recorder, self.redactor, self.hooks, person=self.questions,
                                 default_timeout_s=default_timeout_s)

    @property
    def checkpoints(self) -> ShadowStore | None:
        """The workspace's checkpoint store: recorded before each call that may write (None: no checkpoints)."""
        return self.runner.checkpoints

    @checkpoints.setter
    def checkpoints(self, store: ShadowStore | None) -> None:
        self.runner.checkpoints = store

    @property
    def user_hooks(self) -> HookChain:
        """The person's hooks (settings, a granted hooks file): replaced whole."""
        return self.runner.user_hooks

    @user_hooks.setter
    def user_hooks(self, chain: HookChain) -> None:
        self.runner.user_hooks = chain

    @property
    def writing(self) -> int:
        """Calls that may write, running now: the file watcher tells the person's changes from the tools'."""
        return self.runner.writing

    @property
    def last_write_end(self) -> float:
        """When the last call that may write ended (monotonic seconds)."""
        return self.runner.last_write_end

    # -- public API ---------------------------------------------------------------------------------
    async def run_batch(self, calls: Sequence[ToolCall], run: RunContext,
                        hold: list[HeldFinal] | None = None) -> list[ToolCallRecord]:
        """Run the model's calls: consecutive read-only calls in parallel, writes as barriers; the
        records come back in the calls' order. With `hold`, the final transition of the call that ends the
        batch (when it ends with a result) is held there, neither durable nor published yet, for the caller to
        write with the tool-result message (see FinalHold)."""
        batch = Batch()
        results: list[ToolCallRecord | None] = [None] * len(calls)
        sem = asyncio.Semaphore(self.max_parallel)
        # Every input redacted up front, in one go (on a worker thread when large): the calls then start
        # in the same order as ever, and the bus finds each large value's redaction in the memo.
        stored = await redact_off_loop(self.redactor, [_as_stored(c) for c in calls])

        def last_group(i: int, j: int) -> FinalHold | None:
            return FinalHold(hold, j - i) if hold is not None and j == len(calls) else None

        async def one(i: int, call: ToolCall, final: FinalHold | None = None) -> None:
            async with sem:
                results[i] = await self._run_call(call, run, batch, i, stored[i], final)

        i = 0
        while i < len(calls):
            if self._is_read_only(calls[i]):
                j = i
                while j < len(calls) and self._is_read_only(calls[j]):
                    j += 1
                final = last_group(i, j)
                if j - i == 1:  # one call alone: no task to gather (most steps hold a single call)
                    await one(i, calls[i], final)
                else:
                    await asyncio.gather(*(one(k, calls[k], final) for k in range(i, j)))
                i = j
            else:
                results[i] = await self._run_call(calls[i], run, batch, i, stored[i], last_group(i, i + 1))
                i += 1
        return [r for r in results if r is not None]

    def decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer a call waiting for approval. Calls wait per id, so answers may come in any order.

        Raises ApprovalNotPending (an AgentDeskError) when the call does not wait, because it expired,
        was answered already (here or elsewhere) or is unknown: nothing changes, and a front end drops
        what it shows for that call.
        """
        self.approvals.decide(call_id, decision)

    def pending(self) -> list[ToolCallRecord]:
        """The calls waiting for an answer now."""
        return self.approvals.pending()

    async def seal_open(self, session_id: str) -> SealReport:
        """On reopen: calls that may have run are SEALED; calls that were waiting are offered again."""
        report = SealReport()
        open_states = [ToolCallState.PENDING, ToolCallState.APPROVED, ToolCallState.EXECUTING,
                       ToolCallState.APPROVAL_REQUIRED]
        for record in await self.store.session_records(session_id, open_states):
            if record.state is ToolCallState.APPROVAL_REQUIRED:
                self.approvals.reoffer(record)
                report.reoffered.append(record)
            else:
                await self.recorder.seal(record)
                report.sealed.append(record)
        return report

    async def resume_approvals(self, records: Sequence[ToolCallRecord], run: RunContext) -> list[ToolCallRecord]:
        """Wait for the answers of re-offered calls, then run the allowed ones, in order."""
        batch = self.approvals.resume(records)
        for record in records:
            tool = self.registry.find(record.name)
            if tool is None:
                await self.recorder.fail(record, reasons.unknown_tool(record.name), Outcome.ERROR, actor="system")
                continue
            job = CallJob(record, ToolCall(record.tool_use_id, record.name, record.input), run, batch, tool)
            if not await self.gate.await_answer(job):
                continue
            if holds_redaction(record.input):  # its secrets died with the process that received them
                await self.recorder.fail(record, LOST_SECRETS, Outcome.ERROR, actor="executor",
                                         recs=["Send the call again."])
                continue
            if await self.judge.plan_gate(job) and await self._checkpoint_resumed(job):
                await self.runner.run(job)
        return list(records)

    async def _checkpoint_resumed(self, job: CallJob) -> bool:
        """A call allowed after a restart is checkpointed too; one that cannot be fails, and nothing runs."""
        failed = await checkpoint_before(self.checkpoints, job)
        if failed is not None:
            await self.recorder.fail(job.record, f"{failed.reason}; nothing ran", Outcome.ERROR, actor="executor",
                                     recs=["Send the call again: the person is asked about it then."])
        return failed is None

    def set_rule_writer(self, writer: RuleWriter) -> None:
        """`writer(rule)` persists an "always allow" rule to the project (the front end previews it)."""
        self.approvals.rule_writer = writer

    # -- scheduling ---------------------------------------------------------------------------------
    def _is_read_only(self, call: ToolCall) -> bool:
        tool = self.registry.find(call.name)
        return tool is None or tool.read_only

    def _summary(self, record: ToolCallRecord) -> str:
        tool = self.registry.find(record.name)
        return tool.summarize(record.input) if tool else record.name

    async def _run_call(self, call: ToolCall, run: RunContext, batch: Batch, index: int,
                        redacted: tuple[dict[str, Any], str],
                        final: FinalHold | None = None) -> ToolCallRecord:
        """Run one call; `redacted` is its input and raw JSON as stored (see `_as_stored`)."""
        tool = self.registry.find(call.name)
        raw = call.input if call.input is not None else {}
        stored, raw_json = redacted
        record = ToolCallRecord(
            tool_use_id=call.id, name=call.name, input=stored,
            session_id=run.session_id, project_id=run.project_id, batch_index=index,
            read_only=bool(tool and tool.read_only), risk=Risk.of(tool.risk) if tool else Risk.LOW,
        )
        seen = ToolCall(call.id, call.name, None if call.input is None else stored, raw_json, call.parse_error)
        self.recorder.create(record, seen)
        try:
            await self._pipeline(CallJob(record, call, run, batch, tool, raw_input=raw, hold=final))
        except StoreError as e:
            # The audit log refused a write: the call stops here, visibly; what was written stays.
            self.recorder.unrecorded(record, e)
            run.store_error = run.store_error or e
        except asyncio.CancelledError:
            if not record.terminal and not run.abandoned:
                stopped = self.recorder.fail(record, reasons.STOPPED_CANCELLED, Outcome.INTERRUPTED, actor="system")
                with contextlib.suppress(Exception):
                    await asyncio.shield(stopped)
            raise
        finally:
            self.recorder.forget(record)
            if final is not None:  # however it ended
                final.ended.add(record.id)
        return record

    # -- the pipeline: each step records why it stops a call, or returns True to go on ---------------
    async def _pipeline(self, job: CallJob) -> None:
        steps = (self._check_known_and_parsed, self._skip_after_denial, self._validate, self.judge.check,
                 self._run_pre_hooks, self._checkpoint, self._breakpoint, self.gate.dry_run, self.gate.ask,
                 self.judge.plan_gate)
        for step in steps:
            if not await step(job):
                return
        await self.runner.run(job)

    async def _check_known_and_parsed(self, job: CallJob) -> bool:
        call, record = job.call, job.record
        if job.tool is None:
            close = difflib.get_close_matches(call.name, self.registry.names, n=3)
            recs = [f"Did you mean {', '.join(close)}?"] if close else []
            recs.append(f"Available tools: {', '.join(self.registry.names)}")
            await self.recorder.fail(record, reasons.unknown_tool(call.name), Outcome.ERROR, actor="executor",
                                     recs=recs)
            return False
        if job.run.offered is not None and not job.run.offered(call.name):
            # a tool the agent was not offered (its template forbids it) is refused before anything else
            labels = job.run.labels
            note = reasons.not_offered(call.name, labels.get("subagent") or "this agent", labels.get("template", ""))
            await self.recorder.deny(record, note, Outcome.POLICY, actor="policy")
            return False
        if call.parse_error is not None or call.input is None:
            name = job.tool.name
            await self.recorder.fail(
                record, reasons.not_json(name, call.parse_error or ""),
                Outcome.ERROR, actor="executor",
                recs=[f"Send the input as a JSON object matching the schema of {name}."],
            )
            return False
        return True

    async def _breakpoint(self, job: CallJob) -> bool:
        """A breakpoint the call meets makes it ask, with the breakpoint as its reason (a one-shot is spent)."""
        hit = next((b for b in job.run.breakpoints if b.matches(job.known, asking=bool(job.asks))), None)
        if hit is not None:
            job.asks.append(hit.reason(job.known))
            job.meta["breakpoint"] = hit.on
            if hit.once:
                job.run.breakpoints.remove(hit)
        return True

    async def _skip_after_denial(self, job: CallJob) -> bool:
        if job.batch.denied_by_user:
            await self.gate.skip(job)
            return False
        return True

    async def _validate(self, job: CallJob, raw: dict[str, Any] | None = None) -> bool:
        """Parse and validate `raw` (default: the record's input) into `job.args`."""
        tool, record = job.known, job.record
        try:
            args = tool.parse(job.raw if raw is None else raw)
            await tool.validate(args, tool_context(job, self.bus, self.redactor, self.questions))
        except ValidationError as e:
            msg, recs = _validation_message(tool, e)
            await self.recorder.fail(record, self._clean(msg), Outcome.ERROR, actor="executor",
                                     recs=self.redactor.redact_value(recs))
            return False
        except ToolInputError as e:
            await self.recorder.fail(record, self._clean(reasons.invalid_input(tool.name, str(e))), Outcome.ERROR,
                                     actor="executor", recs=[self._clean(e.hint)] if e.hint else [])
            return False
        job.args = args
        return True

    # -- the pre hooks: the chain's own -> the person's -> the tool's own ---------------------------------
    async def _run_pre_hooks(self, job: CallJob) -> bool:
        chain = HookChain(pre=[*self.hooks.pre, *self.user_hooks.pre, *job.known.pre_hooks()])
        verdict = await chain.run_pre(job.hook_call, deadline_s=self.judge.deadline_s)
        for step in verdict.steps:
            step.provenance = self.judge.cleaned_provenance(step.provenance)
            job.record.provenance.append(step.provenance)
            if not await self._apply_hook_step(job, step):
                return False
        return True

    async def _checkpoint(self, job: CallJob) -> bool:
        """The workspace recorded before a call that may write; one that cannot be recorded asks (a deny
        where nobody is asked), and never runs unrecorded."""
        decision = await checkpoint_before(self.checkpoints, job)
        if decision is None:
            return True
        if not job.policy_asked and self.judge.resolve_ask(job, decision).action is Action.DENY:
            await self.recorder.deny(job.record, f"denied: {decision.reason}", Outcome.POLICY, actor="policy",
                                     data={"provenance": decision.provenance.to_dict()})
            return False
        asked(job, decision)
        return True

    async def _apply_hook_step(self, job: CallJob, step: HookStep) -> bool:
        answer, record, actor = step.answer, job.record, f"hook:{step.hook}"
        if answer.action is PreAction.DENY:
            if answer.result is not None:
                record.result = await redact_off_loop(self.redactor, answer.result.to_dict())
            await self.recorder.deny(record, self._clean(step.deny_note), Outcome.HOOK, actor=actor,
                                     data={"provenance": step.provenance.to_dict()})
            return False
        if answer.action is PreAction.ASK:
            return await self._hook_asks(job, step)
        if answer.action is PreAction.NOTE:
            await self.recorder.note(record, actor, self._clean(answer.reason))
            return True
        if step.stops and answer.result is not None:  # a result stands in for running the tool
            if job.approving is not None and not await self.gate.approve(job, *job.approving):
                return False  # an edit a person allowed, answered by a hook: APPROVED first
            await self.recorder.move(record, ToolCallState.EXECUTING, actor=actor,
                                     note=self._clean(f"short-circuited: {answer.reason}"))
            await self.runner.finish(job, answer.result)
            return False
        if step.rewrites and answer.input is not None:
            original = record.input
            if not await self._validate(job, answer.input):
                return False
            job.raw_input, record.input = answer.input, await redact_off_loop(self.redactor, answer.input)
            await self.recorder.note(record, actor, self._clean(f"input rewritten: {answer.reason}"),
                                     {"original_input": original, "input": record.input})
        return True

    async def _hook_asks(self, job: CallJob, step: HookStep) -> bool:
        answer = step.answer
        if not job.policy_asked:  # where the mode asks nobody, a hook's ask is a deny
            asked = PolicyDecision(Action.ASK, step.provenance, answer.reason, answer.risk or Risk.MEDIUM)
            resolved = self.judge.resolve_ask(job, asked)
            if resolved.action is Action.DENY:
                await self.recorder.deny(job.record, resolved.reason, Outcome.POLICY, actor="policy",
                                         data={"provenance": resolved.provenance.to_dict()})
                return False
        job.asks.append(self._clean(f"{step.hook}: {answer.reason}"))
        job.risk = highest_risk(job.risk, answer.risk or Risk.MEDIUM)
        job.meta.update(self.redactor.redact_value(answer.meta))
        job.meta.setdefault("hooks", []).append(step.hook)
        return True

    # -- a person's edit, judged again (the approval gate hands it back) ---------------------------------
    async def _judge_edit(self, job: CallJob, decision: Allow, prov: Provenance, edited: dict[str, Any]) -> bool:
        """A person's edit is judged like the model's input: validation, the policy, the risk, the pre
        hooks. A deny denies it. It goes back to the person, as a new approval of the edited input, when
        its risk is high or a hook asks; a plain ask of the policy (medium or low) runs on this allow,
        since the person wrote what it asks about."""
        record = job.record
        before = record.input
        if not await self._validate(job, edited):
            return False
        if job.original_input is None:
            job.original_input = before
        job.raw_input = edited
        record.input = record.approval.edited_input = await redact_off_loop(self.redactor, edited)
        await self.recorder.note(record, decision.by, "input edited; judged again before it runs",
                                 {"original_input": before, "edited_input": record.input})
        job.judge_afresh()
        job.approving = (decision, prov)
        try:
            if not await self.judge.check(job) or not await self._run_pre_hooks(job):
                return False
        finally:
            job.approving = None
        if record.state is not ToolCallState.APPROVAL_REQUIRED:  # a hook's result stood in for the run
            return False
        if not await self.gate.dry_run(job, always=True):  # the edit is tried against the file as it is now
            return False
        if job.meta.get("hooks") or (job.asks and job.risk is Risk.HIGH):
            return await self.gate.offer_again(job) and await self.gate.await_answer(job)
        return await self.gate.approve(job, decision, prov)

    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if text else text


def _as_stored(call: ToolCall) -> tuple[dict[str, Any], str]:
    """What of `call` is stored, before redaction: its input, and its raw JSON only when that did not
    parse (the audit keeps what the model sent; a parsed input is the same text, so it is not kept)."""
    return (call.input if call.input is not None else {}), (call.raw_input if call.parse_error else "")
