"""The executor: schedules the model's tool calls and runs each along the pipeline of DESIGN.md.

known and parsed? -> valid input? -> policy -> pre hooks -> dry run (when a person would be asked) -> approval
-> run (timeout, abort) -> post hooks
The pre hooks run as: the chain's own (built-in) -> the person's (`user_hooks`) -> the tool's own; the post
hooks as: the tool's own -> the person's -> the chain's own (redaction, then truncation).
Records change state through the RecordWriter (`_recorder.py`); waiting calls live in `_approvals.py`.
The policy (with the paths it judges resolved in the sandbox) and the pre hooks are judged off the event
loop within a deadline: past it the call asks, it never passes. An input a person edits is judged again.
Secrets never reach the store or the bus from here: a record holds its input redacted (the raw input stays in
the call's `_Job`, to judge and run it), and streamed output is redacted chunk by chunk before it is published.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from ._approvals import (
    SKIPPED_AFTER_DENIAL,
    Allow,
    ApprovalDecision,
    Batch,
    Deny,
    PendingApprovals,
    PendingQuestions,
    RuleWriter,
)
from ._bus import EventBus
from ._errors import AgentDeskError, PathOutsideWorkspace, StoreError, ToolInputError
from ._events import ErrorEvent, PermissionDecided, TodoChanged, ToolCustom, ToolUpdate
from ._hooks import (
    NOT_JUDGED_IN_TIME,
    HookCall,
    HookChain,
    HookStep,
    PreAction,
    SecretRedactionHook,
    redact_off_loop,
    text_size,
)
from ._messages import ToolCall
from ._policy import COMMAND_TOOLS, Action, PermissionMode, PermissionPolicy, PolicyDecision, ToolFacts
from ._record import Outcome, Provenance, Risk, ToolCallRecord, ToolCallState, highest_risk
from ._recorder import RecordWriter
from ._redaction import DEFAULT_REDACTOR, REDACTED, Redactor, StreamRedactor
from ._registry import ToolRegistry
from ._store import RecordStore
from ._tool import TextBlock, Tool, ToolContext, ToolResult
from ._workspace_sync import SyncOutcome, sync_step

if TYPE_CHECKING:
    from ._sandbox import Sandbox

DEFAULT_TOOL_TIMEOUT_S = 120.0
TODOS_STATE_KEY = "todos"  # where the session's todo list lives in RunContext.state (tools.TODOS_KEY)
# The workspace paths (/workspace/...) changed on the host since a tool last read or wrote them.
HOST_CHANGED_KEY = "host_changed"
DEFAULT_JUDGE_DEADLINE_S = 2.0  # for the policy (paths resolved included), and again for the pre hooks
MAX_RESOLVED_PATHS = 32  # paths of one call resolved in the sandbox before the policy judges them
DRY_RUN_DEADLINE_S = 10.0  # a dry run (a file read and a diff) past this asks without its preview
MAX_CARD_DIFF_CHARS = 400_000  # a longer diff is not put on the card's record (the call's result keeps it)
_T = TypeVar("_T")


def call_risk(tool_name: str, tool_risk: Risk | str, decision: PolicyDecision) -> Risk:
    """A call's risk before the hooks speak. The policy judges a command by what it does, so its risk is
    the command's (`ls` is low, a wipe high); for other tools the tool's own risk is a floor."""
    if tool_name in COMMAND_TOOLS:
        return decision.risk
    return highest_risk(tool_risk, decision.risk)


INLINE_JUDGE_CHARS = 512


def _not_in_time(deadline_s: float) -> PolicyDecision:
    return PolicyDecision(Action.ASK, Provenance("deadline", f"{deadline_s:g} s", decision="ask"),
                          NOT_JUDGED_IN_TIME, Risk.HIGH)


@dataclass(slots=True)
class RunContext:
    """Per-session things every call of the session shares."""

    session_id: str
    project_id: str = ""
    sandbox: Sandbox | None = None
    state: dict[str, Any] = field(default_factory=dict)
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    # The first write the audit store refused in this run: the agent ends the turn on it (taken, then cleared).
    store_error: StoreError | None = None
    # The app quits without stopping the run (AgentSession.abandon): a cancelled call is left as it stands,
    # for the next start to seal (running) or offer again (waiting for approval).
    abandoned: bool = False
    # A sub-agent's or a template's run: its own policy (never wider than the executor's, see
    # core/_templates.py), the only tools it may call (None: any registered one), and what its approvals
    # carry for the inbox (the sub-agent's name, its parent call).
    policy: Any = None
    offered: Callable[[str], bool] | None = None
    labels: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SealReport:
    sealed: list[ToolCallRecord] = field(default_factory=list)
    reoffered: list[ToolCallRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Job:
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

    @property
    def raw(self) -> dict[str, Any]:
        return self.raw_input if self.raw_input is not None else self.record.input

    def judge_afresh(self) -> None:
        """What the policy and the hooks said of an earlier input goes: an edit is judged on its own."""
        self.policy_asked, self.asks, self.meta = False, [], {}
        self.risk = Risk.of(self.known.risk)

    @property
    def known(self) -> Tool:
        assert self.tool is not None, "_check_known_and_parsed runs first"
        return self.tool

    @property
    def hook_call(self) -> HookCall:
        r = self.record
        return HookCall(r.id, r.session_id, self.known.name, self.raw, self.known.read_only)


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
    """Runs batches of tool calls; records change state only here, through its RecordWriter."""

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
        self.hooks, self.redactor = _redaction_first(hooks or HookChain(), redactor)
        self.user_hooks = HookChain()  # the person's hooks (settings, a granted hooks file): replaced whole
        self.max_parallel = max(1, max_parallel)
        self.default_timeout_s = default_timeout_s
        self.judge_deadline_s = judge_deadline_s
        self.max_resolved_paths = max_resolved_paths
        # The policy judges on threads of its own: a slow judgement never starves the loop's default
        # executor, and many slow ones only queue here (then they ask, past the deadline).
        self._judges = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agent-desk-policy")
        self.recorder = RecordWriter(store, bus, self._summary)
        self.approvals = PendingApprovals(bus, policy, timeout_s=approval_timeout_s)
        self.questions = PendingQuestions(bus, policy, timeout_s=approval_timeout_s)
        # Calls that may write, running now, and when the last one ended: the file watcher tells the
        # person's changes from the tools' by them (monotonic seconds).
        self.writing = 0
        self.last_write_end = 0.0

    # -- public API ---------------------------------------------------------------------------------
    async def run_batch(self, calls: Sequence[ToolCall], run: RunContext) -> list[ToolCallRecord]:
        """Run the model's calls: consecutive read-only calls in parallel, writes as barriers; the
        records come back in the calls' order."""
        batch = Batch()
        results: list[ToolCallRecord | None] = [None] * len(calls)
        sem = asyncio.Semaphore(self.max_parallel)
        # Every input redacted up front, in one go (on a worker thread when large): the calls then start
        # in the same order as ever, and the bus finds each large value's redaction in the memo.
        stored = await redact_off_loop(self.redactor, [_as_stored(c) for c in calls])

        async def one(i: int, call: ToolCall) -> None:
            async with sem:
                results[i] = await self._run_call(call, run, batch, i, stored[i])

        i = 0
        while i < len(calls):
            if self._is_read_only(calls[i]):
                j = i
                while j < len(calls) and self._is_read_only(calls[j]):
                    j += 1
                if j - i == 1:  # one call alone: no task to gather (most steps hold a single call)
                    await one(i, calls[i])
                else:
                    await asyncio.gather(*(one(k, calls[k]) for k in range(i, j)))
                i = j
            else:
                results[i] = await self._run_call(calls[i], run, batch, i, stored[i])
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
                await self.recorder.fail(record, f"unknown tool {record.name!r}", Outcome.ERROR, actor="system")
                continue
            job = _Job(record, ToolCall(record.tool_use_id, record.name, record.input), run, batch, tool)
            if not await self._await_answer(job):
                continue
            if _holds_redaction(record.input):  # its secrets died with the process that received them
                await self.recorder.fail(record, LOST_SECRETS, Outcome.ERROR, actor="executor",
                                         recs=["Send the call again."])
                continue
            if await self._plan_gate(job):
                await self._execute(job)
        return list(records)

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
                        redacted: tuple[dict[str, Any], str]) -> ToolCallRecord:
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
            await self._pipeline(_Job(record, call, run, batch, tool, raw_input=raw))
        except StoreError as e:
            # The audit log refused a write: the call stops here, visibly; what was written stays.
            self.recorder.unrecorded(record, e)
            run.store_error = run.store_error or e
        except asyncio.CancelledError:
            if not record.terminal and not run.abandoned:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.recorder.fail(record, "cancelled", Outcome.CANCELLED, actor="system"))
            raise
        finally:
            self.recorder.forget(record)
        return record

    # -- the pipeline: each step records why it stops a call, or returns True to go on ---------------
    async def _pipeline(self, job: _Job) -> None:
        steps = (self._check_known_and_parsed, self._skip_after_denial, self._validate, self._decide_policy,
                 self._run_pre_hooks, self._dry_run, self._gate_on_approval, self._plan_gate)
        for step in steps:
            if not await step(job):
                return
        await self._execute(job)

    async def _check_known_and_parsed(self, job: _Job) -> bool:
        call, record = job.call, job.record
        if job.tool is None:
            close = difflib.get_close_matches(call.name, self.registry.names, n=3)
            recs = [f"Did you mean {', '.join(close)}?"] if close else []
            recs.append(f"Available tools: {', '.join(self.registry.names)}")
            await self.recorder.fail(record, f"unknown tool {call.name!r}", Outcome.ERROR, actor="executor",
                                     recs=recs)
            return False
        if job.run.offered is not None and not job.run.offered(call.name):
            # a tool the agent was not offered (its template forbids it) is refused before anything else
            who = job.run.labels.get("subagent") or "this agent"
            where = f" (template {job.run.labels['template']})" if job.run.labels.get("template") else ""
            note = f"{call.name} is not available to {who}{where}: use only the tools you were given"
            await self.recorder.deny(record, note, Outcome.POLICY, actor="policy")
            return False
        if call.parse_error is not None or call.input is None:
            name = job.tool.name
            await self.recorder.fail(
                record, f"the input of {name} is not valid JSON: {call.parse_error or 'missing'}",
                Outcome.ERROR, actor="executor",
                recs=[f"Send the input as a JSON object matching the schema of {name}."],
            )
            return False
        return True

    async def _skip_after_denial(self, job: _Job) -> bool:
        if job.batch.denied_by_user:
            await self.recorder.deny(job.record, SKIPPED_AFTER_DENIAL, Outcome.USER, actor="executor")
            return False
        return True

    async def _validate(self, job: _Job, raw: dict[str, Any] | None = None) -> bool:
        """Parse and validate `raw` (default: the record's input) into `job.args`."""
        tool, record = job.known, job.record
        try:
            args = tool.parse(job.raw if raw is None else raw)
            await tool.validate(args, self._context(job))
        except ValidationError as e:
            msg, recs = _validation_message(tool, e)
            await self.recorder.fail(record, self._clean(msg), Outcome.ERROR, actor="executor",
                                     recs=self.redactor.redact_value(recs))
            return False
        except ToolInputError as e:
            await self.recorder.fail(record, self._clean(f"invalid input for {tool.name}: {e}"), Outcome.ERROR,
                                     actor="executor", recs=[self._clean(e.hint)] if e.hint else [])
            return False
        job.args = args
        return True

    def _policy(self, run: RunContext) -> PermissionPolicy:
        return run.policy if run.policy is not None else self.policy

    async def _decide_policy(self, job: _Job) -> bool:
        tool, record = job.known, job.record
        facts = ToolFacts(tool.name, tool.group, tool.trusted_read_only, Risk.of(tool.risk))
        decision = self._cleaned(self._policy(job.run).resolve_ask(await self._judge(facts, job.raw, job.run),
                                                                   job.run.session_id))
        record.provenance.append(decision.provenance)
        if decision.action is Action.DENY:
            # The model reads the policy's reason in plain words; the rule stays in the provenance.
            await self.recorder.deny(record, f"denied by policy: {decision.reason}", Outcome.POLICY,
                                     actor="policy", data={"provenance": decision.provenance.to_dict()})
            return False
        job.risk = call_risk(tool.name, tool.risk, decision)
        if decision.action is Action.ASK:
            job.policy_asked = True
            job.asks.append(decision.reason)
        return True

    # -- judging off the loop, within the deadline ---------------------------------------------------
    async def _judge(self, facts: ToolFacts, input: dict[str, Any], run: RunContext) -> PolicyDecision:
        """The policy's decision on `input`, judged on a worker thread with the paths it judges resolved
        in the sandbox; past the deadline, an ask with risk high (never an allow). The deadline runs
        twice: for asking the policy which paths it judges, then for resolving them and judging; a
        sandbox that is still starting gets its own time in between (starting is not judging)."""
        policy, sid, sandbox = self._policy(run), run.session_id, run.sandbox

        def first() -> tuple[list[str], PolicyDecision | None]:  # one thread hop when no path needs resolving
            paths = policy.paths_to_resolve(facts, input)
            return paths, (None if paths else policy.evaluate(facts, input, session_id=sid))

        try:
            async with asyncio.timeout(self.judge_deadline_s):
                paths, decision = first() if self._judged_inline(input, policy) else await self._off_loop(first)
            if decision is not None:
                return decision
            failure = await _started(sandbox)
            async with asyncio.timeout(self.judge_deadline_s):
                resolved, failure = (None, failure) if failure else await self._resolve(paths, sandbox)
                decision = await self._off_loop(partial(policy.evaluate, facts, input, session_id=sid,
                                                        resolved=resolved))
        except TimeoutError:
            return _not_in_time(self.judge_deadline_s)
        if not failure or decision.action is Action.DENY:
            return decision
        reason = failure if decision.action is Action.ALLOW else f"{decision.reason}; {failure}"
        return PolicyDecision(Action.ASK, Provenance("sandbox", "path resolution", decision="ask"), reason,
                              Risk.HIGH)

    def _judged_inline(self, input: dict[str, Any], policy: Any = None) -> bool:
        """The built-in policy on a small input is judged on the loop: its work is linear and bounded (a
        command of INLINE_JUDGE_CHARS takes a fraction of a millisecond), where a thread hop costs more than
        the judging. Any other policy, or a larger input, is judged on a worker thread under the deadline."""
        small = text_size(input, INLINE_JUDGE_CHARS) <= INLINE_JUDGE_CHARS
        return small and type(self.policy if policy is None else policy) is PermissionPolicy

    async def _off_loop(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._judges, fn)

    async def _resolve(self, paths: list[str], sandbox: Sandbox | None) -> tuple[dict[str, str] | None, str]:
        """The paths as the sandbox will really touch them (`/workspace/...`), and why the call must ask
        when some could not be resolved ("" when all were). A path that ends outside the workspace is
        left out. Without a sandbox the policy judges the paths as written (no tool can run then)."""
        if sandbox is None:
            return None, ""
        unique = list(dict.fromkeys(paths))
        if len(unique) > self.max_resolved_paths:
            return None, f"the call writes {len(unique)} paths, more than the {self.max_resolved_paths} checked"

        async def real(path: str) -> str:
            return await sandbox.real_path(path)

        # `~` is bash's home, not a folder of the workspace: such a path is judged as written.
        unique = [p for p in unique if not p.startswith("~")]
        answers = await asyncio.gather(*(real(p) for p in unique), return_exceptions=True)
        resolved: dict[str, str] = {}
        for path, answer in zip(unique, answers, strict=True):
            if isinstance(answer, str):
                resolved[path] = answer
            elif not isinstance(answer, PathOutsideWorkspace):
                return resolved, f"the sandbox could not resolve the path {path!r}"
        return resolved, ""

    async def _run_pre_hooks(self, job: _Job) -> bool:
        chain = HookChain(pre=[*self.hooks.pre, *self.user_hooks.pre, *_own_hooks(job.known, "pre_hooks")])
        verdict = await chain.run_pre(job.hook_call, deadline_s=self.judge_deadline_s)
        for step in verdict.steps:
            step.provenance = self._cleaned_provenance(step.provenance)
            job.record.provenance.append(step.provenance)
            if not await self._apply_hook_step(job, step):
                return False
        return True

    async def _apply_hook_step(self, job: _Job, step: HookStep) -> bool:
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
            if job.approving is not None and not await self._approve(job, *job.approving):
                return False  # an edit a person allowed, answered by a hook: APPROVED first
            await self.recorder.move(record, ToolCallState.EXECUTING, actor=actor,
                                     note=self._clean(f"short-circuited: {answer.reason}"))
            await self._finish(job, answer.result)
            return False
        if step.rewrites and answer.input is not None:
            original = record.input
            if not await self._validate(job, answer.input):
                return False
            job.raw_input, record.input = answer.input, await redact_off_loop(self.redactor, answer.input)
            await self.recorder.note(record, actor, self._clean(f"input rewritten: {answer.reason}"),
                                     {"original_input": original, "input": record.input})
        return True

    async def _hook_asks(self, job: _Job, step: HookStep) -> bool:
        answer = step.answer
        if not job.policy_asked:  # where the mode asks nobody, a hook's ask is a deny
            asked = PolicyDecision(Action.ASK, step.provenance, answer.reason, answer.risk or Risk.MEDIUM)
            resolved = self._cleaned(self._policy(job.run).resolve_ask(asked, job.run.session_id))
            if resolved.action is Action.DENY:
                await self.recorder.deny(job.record, resolved.reason, Outcome.POLICY, actor="policy",
                                         data={"provenance": resolved.provenance.to_dict()})
                return False
        job.asks.append(self._clean(f"{step.hook}: {answer.reason}"))
        job.risk = highest_risk(job.risk, answer.risk or Risk.MEDIUM)
        job.meta.update(self.redactor.redact_value(answer.meta))
        job.meta.setdefault("hooks", []).append(step.hook)
        return True

    async def _dry_run(self, job: _Job, *, always: bool = False) -> bool:
        """Before a person is asked (or `always`, for a person's edit): the call is tried without effect,
        a file edit against the file as it is now. A call bound to fail fails here, with the reason sent to
        the model and kept in the audit, and nobody is asked; what it would change goes on the card."""
        if not job.asks and not always:
            return True  # nobody is asked: the tool checks the same things when it runs
        record, tool = job.record, job.known
        try:
            async with asyncio.timeout(DRY_RUN_DEADLINE_S):
                preview = await tool.dry_run(job.args, self._context(job))
        except ToolInputError as e:
            await self.recorder.fail(record, self._clean(f"{tool.name} would fail, so nobody was asked: {e}"),
                                     Outcome.ERROR, actor="dry run", recs=[self._clean(e.hint)] if e.hint else [])
            return False
        except Exception as e:  # the dry run could not tell (a slow or absent engine): the person decides
            job.meta["dry_run"] = self._clean(f"not checked before asking: {type(e).__name__}: {e}")
            return True
        job.meta.pop("dry_run", None)
        if preview is None:
            job.meta.pop("diff", None)
        elif len(preview) > MAX_CARD_DIFF_CHARS:
            job.meta["diff"] = ""
            job.meta["diff_omitted"] = f"the diff is {len(preview):,} characters, more than the card shows"
        else:
            job.meta["diff"] = await redact_off_loop(self.redactor, preview)
        return True

    async def _gate_on_approval(self, job: _Job) -> bool:
        record = job.record
        record.risk = job.risk
        reason = "; ".join(x for x in job.asks if x)
        if not reason:
            return True
        if job.raw is not record.input:  # the person sees the input as stored: say what they cannot see
            reason += f"; {SHOWN_REDACTED}"
            job.meta["redacted"] = True
        self.approvals.register(record, job.batch, reason=reason, meta={**job.meta, **job.run.labels})
        await self.recorder.move(record, ToolCallState.APPROVAL_REQUIRED, actor="policy", note=reason,
                                 data={"risk": job.risk, "provenance": [p.to_dict() for p in record.provenance]})
        self.approvals.announce(record)
        return await self._await_answer(job)

    async def _await_answer(self, job: _Job) -> bool:
        record, run = job.record, job.run
        decision = await self.approvals.wait(record, run.abort, job.batch)
        if decision is None:
            if run.abort.is_set():
                await self.recorder.fail(record, "cancelled while waiting for approval", Outcome.CANCELLED,
                                         actor="user")
            else:
                await self.recorder.deny(record, "the approval expired", Outcome.EXPIRED, actor="system")
            return False
        prov = self.approvals.record_answer(record, decision)
        if isinstance(decision, Deny):
            await self._denied(job, decision, prov)
            return False
        return await self._allowed(job, decision, prov)

    async def _denied(self, job: _Job, decision: Deny, prov: Provenance) -> None:
        record = job.record
        job.batch.denied_by_user = True
        note = self._clean(decision.note) or "denied by the user"
        await self.recorder.deny(record, f"denied by {decision.by}: {note}", Outcome.USER, actor=decision.by,
                                 data={"provenance": prov.to_dict()})
        self.bus.publish(PermissionDecided(session_id=record.session_id, call_id=record.id, decision="deny",
                                           decided_by=decision.by, note=decision.note))
        # The rest of the batch does not run: calls still waiting are skipped too.
        self.approvals.skip_waiting(job.batch)

    async def _allowed(self, job: _Job, decision: Allow, prov: Provenance) -> bool:
        edited = decision.edited_input
        if edited is not None and edited != job.record.input:
            return await self._judge_edit(job, decision, prov, _restore(edited, job.record.input, job.raw))
        job.args = job.known.parse(job.raw)
        return await self._approve(job, decision, prov)

    async def _judge_edit(self, job: _Job, decision: Allow, prov: Provenance, edited: dict[str, Any]) -> bool:
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
            if not await self._decide_policy(job) or not await self._run_pre_hooks(job):
                return False
        finally:
            job.approving = None
        if record.state is not ToolCallState.APPROVAL_REQUIRED:  # a hook's result stood in for the run
            return False
        if not await self._dry_run(job, always=True):  # the edit is tried against the file as it is now
            return False
        if job.meta.get("hooks") or (job.asks and job.risk is Risk.HIGH):
            return await self._ask_again(job)
        return await self._approve(job, decision, prov)

    async def _ask_again(self, job: _Job) -> bool:
        """Offer the edited input to a person once more, with its own risk and reasons."""
        record = job.record
        if job.batch.denied_by_user:
            await self.recorder.deny(record, SKIPPED_AFTER_DENIAL, Outcome.USER, actor="executor")
            return False
        reason = "; ".join(x for x in job.asks if x)
        record.risk = job.risk
        ap = record.approval
        ap.decision, ap.decided_by, ap.decided_at, ap.note = None, None, None, ""
        self.approvals.register(record, job.batch, reason=reason, meta={**job.meta, **job.run.labels})
        await self.recorder.note(record, "policy", f"the edited input asks again: {reason}",
                                 {"risk": job.risk, "input": record.input,
                                  "provenance": [p.to_dict() for p in record.provenance]})
        self.approvals.announce(record)
        return await self._await_answer(job)

    async def _approve(self, job: _Job, decision: Allow, prov: Provenance) -> bool:
        record = job.record
        data: dict[str, Any] = {"provenance": prov.to_dict(), "scope": str(decision.scope)}
        if job.original_input is not None:  # the audit keeps both: what the model asked, what ran
            data.update(original_input=job.original_input, edited_input=record.approval.edited_input)
        rule = await self._off_loop(partial(self.approvals.rule_for, record, decision))
        if rule is not None:
            self.approvals.remember(rule, record, decision.scope)
            data["rule_added"] = rule.text
        job.approval_note = self._clean(decision.note.strip())
        if job.approval_note:  # the audit keeps it apart from the trail's note: it goes to the model
            data["approval_note"] = job.approval_note
        await self.recorder.move(record, ToolCallState.APPROVED, actor=decision.by, note=job.approval_note,
                                 data=data)
        self.bus.publish(PermissionDecided(session_id=record.session_id, call_id=record.id, decision="allow",
                                           decided_by=decision.by, note=decision.note,
                                           edited=record.approval.edited_input is not None))
        if job.batch.denied_by_user:
            await self.recorder.fail(record, SKIPPED_AFTER_DENIAL, Outcome.CANCELLED, actor="executor")
            return False
        return True

    async def _plan_gate(self, job: _Job) -> bool:
        """The last word of plan mode, on the input that will run: a hook's rewrite, a person's edit or an
        approval offered before the session entered plan mode cannot make a write run while planning."""
        if self.policy.mode_for(job.run.session_id) is not PermissionMode.PLAN:
            return True
        tool = job.known
        facts = ToolFacts(tool.name, tool.group, tool.trusted_read_only, Risk.of(tool.risk))
        refusal = await self._off_loop(partial(self.policy.plan_refusal, facts, job.raw, job.run.session_id))
        if refusal is None:
            return True
        job.record.provenance.append(refusal.provenance)
        note = self._clean(f"denied by policy: {refusal.reason}")
        if job.record.state is ToolCallState.APPROVED:  # allowed by a person before the session began planning
            await self.recorder.fail(job.record, note, Outcome.CANCELLED, actor="policy")
        else:
            await self.recorder.deny(job.record, note, Outcome.POLICY, actor="policy",
                                     data={"provenance": refusal.provenance.to_dict()})
        return False

    # -- running the tool ---------------------------------------------------------------------------
    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if text else text

    def _cleaned_provenance(self, prov: Provenance) -> Provenance:
        detail = self._clean(prov.detail)
        return prov if detail == prov.detail else replace(prov, detail=detail)

    def _cleaned(self, decision: PolicyDecision) -> PolicyDecision:
        """The policy judged the raw input: what it says goes on the record, so it is redacted."""
        reason, prov = self._clean(decision.reason), self._cleaned_provenance(decision.provenance)
        if reason == decision.reason and prov is decision.provenance:
            return decision
        return replace(decision, reason=reason, provenance=prov)

    def _context(self, job: _Job) -> ToolContext:
        bus, sid, cid, run = self.bus, job.record.session_id, job.record.id, job.run
        streams, redactor = job.streams, self.redactor

        def update(text: str, stream: str = "stdout") -> None:
            # Redacted before it is published (the bus persists it): a secret split across chunks waits
            # in the stream's carry-over until it is whole.
            sr = streams.get(stream)
            if sr is None:
                sr = streams[stream] = StreamRedactor(redactor)
            text = sr.feed(text)
            if text:
                bus.publish(ToolUpdate(session_id=sid, call_id=cid, stream=stream, text=text))

        def emit(name: str, data: dict[str, Any]) -> None:  # the bus redacts every payload it publishes
            job.emitted += 1
            if job.emitted > MAX_CUSTOM_EVENTS:
                if job.emitted == MAX_CUSTOM_EVENTS + 1:  # said once; a tool in a loop cannot flood the audit
                    bus.publish(ToolCustom(session_id=sid, call_id=cid, tool=job.known.name, name="dropped",
                                           data={"reason": f"more than {MAX_CUSTOM_EVENTS} events"}))
                return
            bus.publish(ToolCustom(session_id=sid, call_id=cid, tool=job.known.name, name=name,
                                   data=_custom_data(data)))

        return ToolContext(call_id=cid, session_id=sid, sandbox=run.sandbox, abort=run.abort, state=run.state,
                           project_id=run.project_id, _update=update, _emit=emit, person=self.questions)

    async def _execute(self, job: _Job) -> None:
        record, tool, run = job.record, job.known, job.run
        if run.abort.is_set():
            await self.recorder.fail(record, "cancelled before it ran", Outcome.CANCELLED, actor="user")
            return
        with contextlib.suppress(Exception):  # where it runs: the session's sandbox, or the tool's own place
            where_of = getattr(tool, "where", None)
            where_run = where_of(run.sandbox) if where_of else run.sandbox and run.sandbox.describe()
            if where_run is not None:
                record.sandbox = where_run.to_dict()
        where = {"sandbox": record.sandbox} if record.sandbox else None
        await self.recorder.move(record, ToolCallState.EXECUTING, actor="executor", data=where)
        ctx = self._context(job)
        timeout = tool.timeout_for(job.args) if hasattr(tool, "timeout_for") else tool.timeout_s
        timeout = timeout or self.default_timeout_s
        ctx.deadline = time.monotonic() + timeout
        before = await self._sync(job, "in")
        if before.failed:
            await self.recorder.fail(record, before.text, Outcome.ERROR, actor="executor",
                                     recs=["Retry once the engine answers; nothing ran."])
            return
        todos = run.state.get(TODOS_STATE_KEY)
        task = asyncio.ensure_future(tool.run(job.args, ctx))
        self.writing += not tool.read_only
        try:
            in_time = await _finished_in_time(task, run.abort, timeout)
            self._flush_updates(job)
            # Even a call that failed or was cancelled may have changed files: they come back all the same.
            after = await self._sync(job, "both") if not tool.read_only else before
        finally:  # the files it wrote (and the sync brought back) are the tool's, not the person's
            if not tool.read_only:
                self.writing -= 1
                self.last_write_end = time.monotonic()
        self._todos_changed(job, todos)
        if not in_time:
            if run.abort.is_set():
                await self.recorder.fail(record, "cancelled by the user", Outcome.CANCELLED, actor="user")
            else:
                await self.recorder.fail(record, f"{tool.name} timed out after {timeout:g} s", Outcome.TIMEOUT,
                                         actor="executor",
                                         recs=["Use a shorter command, or a larger timeout if the tool takes one."])
            return
        result = await self._tool_result(job, task)
        if result is not None:
            notes = "\n".join(t for t in {before.text: 0, after.text: 0} if t)
            if notes:  # the model learns of a conflict in the same result that caused it
                result = replace(result, content=[*result.content, TextBlock(f"\nworkspace sync:\n{notes}")])
            await self._finish(job, result)

    async def _sync(self, job: _Job, direction: str) -> SyncOutcome:
        """A synced workspace brought up to date (see core/_workspace_sync.py); what went wrong is noted in
        the record's trail and published as an ErrorEvent, so the person sees it too."""
        outcome = await sync_step(job.run.sandbox, direction)
        if outcome.text:
            text = self._clean(outcome.text)
            await self.recorder.note(job.record, "workspace sync", text)
            self.bus.publish(ErrorEvent(session_id=job.record.session_id, source="workspace sync", message=text,
                                        phase="tool", severity="error" if outcome.failed else "warn"))
        return outcome

    def _todos_changed(self, job: _Job, before: Any) -> None:
        """A call replaced the session's todo list: `todo_changed`, with the new list and its counts."""
        todos = job.run.state.get(TODOS_STATE_KEY)
        if todos is before or not isinstance(todos, list):
            return
        counts = {s: sum(1 for t in todos if isinstance(t, dict) and t.get("status") == s)
                  for s in ("pending", "in_progress", "completed")}
        self.bus.publish(TodoChanged(session_id=job.record.session_id, call_id=job.record.id,
                                     todos=[dict(t) for t in todos if isinstance(t, dict)], counts=counts))

    def _flush_updates(self, job: _Job) -> None:
        """What the streams still hold, redacted: the tool has ended."""
        record = job.record
        for stream, sr in job.streams.items():
            rest = sr.flush()
            if rest:
                self.bus.publish(ToolUpdate(session_id=record.session_id, call_id=record.id, stream=stream,
                                            text=rest))

    async def _tool_result(self, job: _Job, task: asyncio.Future[Any]) -> ToolResult | None:
        """What the finished tool returned, as a ToolResult; None when it raised (the call has failed)."""
        name = job.known.name
        try:
            out = task.result()
        except AgentDeskError as e:
            await self.recorder.fail(job.record, self._clean(f"{name} failed: {e}"), Outcome.ERROR,
                                     actor="executor", recs=[self._clean(e.hint)] if e.hint else [])
            return None
        except Exception as e:
            await self.recorder.fail(job.record, self._clean(f"{name} raised {type(e).__name__}: {e}"),
                                     Outcome.ERROR, actor="executor",
                                     recs=["Check the input, or try another approach."])
            return None
        return out if isinstance(out, ToolResult) else ToolResult.text(str(out))

    async def _finish(self, job: _Job, result: ToolResult) -> None:
        record = job.record
        first = HookChain(post=[*_own_hooks(job.known, "post_hooks"), *self.user_hooks.post])
        verdict = await first.run_post(job.hook_call, result) if first.post else None
        if verdict is None or not verdict.error:  # then redaction and truncation, over what those hooks added
            changes = verdict.changes if verdict else []
            verdict = await self.hooks.run_post(job.hook_call, verdict.result if verdict else result)
            verdict.changes[:0] = changes
        for hook, note in verdict.changes:
            await self.recorder.note(record, f"hook:{hook}", self._clean(note))
        if verdict.error:
            await self.recorder.fail(record, verdict.error, Outcome.ERROR, actor=f"hook:{verdict.failed_hook}")
            return
        result = verdict.result
        if job.approval_note:  # "yes, but...": the model reads the person's note with the result
            note = TextBlock(f"\n{APPROVAL_NOTE_PREFIX}{job.approval_note}")
            result = replace(result, content=[*result.content, note])
        await self.recorder.finish(record, result)


APPROVAL_NOTE_PREFIX = "The user approved this call with a note: "
SHOWN_REDACTED = "secrets in this input are shown as [REDACTED] (they run as written)"
LOST_SECRETS = ("this call's input held secrets, which are never stored, so it cannot run after the session "
                "was reopened")


MAX_CUSTOM_EVENTS = 1_000  # per call
MAX_CUSTOM_DATA_CHARS = 16_000


def _custom_data(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as JSON would carry it (what is not JSON becomes its str), or a note when it is too large."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    if len(text) > MAX_CUSTOM_DATA_CHARS:
        return {"truncated": True, "preview": text[:1_000]}
    return json.loads(text)


def _own_hooks(tool: Tool, which: str) -> list[Any]:
    """A tool's own pre or post hooks (a tool-like object without them has none)."""
    hooks = getattr(tool, which, None)
    return list(hooks()) if callable(hooks) else []


def _redaction_first(hooks: HookChain, redactor: Redactor | None) -> tuple[HookChain, Redactor]:
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


def _as_stored(call: ToolCall) -> tuple[dict[str, Any], str]:
    """What of `call` is stored, before redaction: its input, and its raw JSON only when that did not
    parse (the audit keeps what the model sent; a parsed input is the same text, so it is not kept)."""
    return (call.input if call.input is not None else {}), (call.raw_input if call.parse_error else "")


def _holds_redaction(value: Any) -> bool:
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, dict):
        return any(_holds_redaction(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_redaction(v) for v in value)
    return False


def _restore(edited: dict[str, Any], shown: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """A person edits the input as shown, redacted: a field they left as shown runs with its raw value."""
    return {k: raw[k] if k in raw and k in shown and v == shown[k] else v for k, v in edited.items()}


async def _started(sandbox: Sandbox | None) -> str:
    """"" once `sandbox` runs (a Docker sandbox may still be creating its container), else why not."""
    if sandbox is None:
        return ""
    try:
        await sandbox.start()
    except Exception as e:  # any failure: the paths cannot be resolved, so the call asks
        return f"the sandbox could not start to resolve the paths: {e}"
    return ""


async def _finished_in_time(task: asyncio.Future[Any], abort: asyncio.Event, limit_s: float) -> bool:
    """Wait for `task` until it ends, `abort` is set or `limit_s` passes; a task that did not end is
    cancelled (and awaited) before this returns False."""
    abort_wait = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({task, abort_wait}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        abort_wait.cancel()
        raise
    abort_wait.cancel()
    if task in done:
        return True
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    return False
