"""The judge: the policy's decision on a call, with the paths it judges resolved in the sandbox, judged off
the event loop (on threads of its own) within a deadline; past it the call asks, it never passes. It is the
pipeline's policy step and plan mode's last word before a call runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import PathOutsideWorkspace
from ._hooks import NOT_JUDGED_IN_TIME, text_size
from ._record import Outcome, Provenance, Risk, ToolCallState, highest_risk
from ._recorder import RecordWriter
from ._redaction import Redactor
from ._run import CallJob, RunContext
from .policy import COMMAND_TOOLS, Action, PermissionMode, Policy, PolicyDecision, ToolFacts

if TYPE_CHECKING:
    from ._sandbox import Sandbox

DEFAULT_JUDGE_DEADLINE_S = 2.0  # for the policy (paths resolved included), and again for the pre hooks
MAX_RESOLVED_PATHS = 32  # paths of one call resolved in the sandbox before the policy judges them
INLINE_JUDGE_CHARS = 512
_T = TypeVar("_T")


def call_risk(tool_name: str, tool_risk: Risk | str, decision: PolicyDecision) -> Risk:
    """A call's risk before the hooks speak. The policy judges a command by what it does, so its risk is
    the command's (`ls` is low, a wipe high); for other tools the tool's own risk is a floor."""
    if tool_name in COMMAND_TOOLS:
        return decision.risk
    return highest_risk(tool_risk, decision.risk)


def facts_of(job: CallJob) -> ToolFacts:
    tool = job.known
    return ToolFacts(tool.name, tool.group, tool.trusted_read_only, Risk.of(tool.risk))


class Judge:
    """Asks the policy (a session's own, else `policy`) about calls, within `deadline_s`; records its denials."""

    def __init__(self, policy: Policy, recorder: RecordWriter, redactor: Redactor, *,
                 deadline_s: float = DEFAULT_JUDGE_DEADLINE_S, max_resolved_paths: int = MAX_RESOLVED_PATHS) -> None:
        self.policy = policy
        self.recorder = recorder
        self.redactor = redactor
        self.deadline_s = deadline_s
        self.max_resolved_paths = max_resolved_paths
        # The policy judges on threads of its own: a slow judgement never starves the loop's default
        # executor, and many slow ones only queue here (then they ask, past the deadline).
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agent-desk-policy")

    def policy_for(self, run: RunContext) -> Policy:
        return run.policy if run.policy is not None else self.policy

    async def check(self, job: CallJob) -> bool:
        """The pipeline's policy step: a deny ends the call (recorded), an ask is noted for the person."""
        tool, record = job.known, job.record
        decision = await self.decide(job)
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

    async def plan_gate(self, job: CallJob) -> bool:
        """The last word of plan mode, on the input that will run: a hook's rewrite, a person's edit or an
        approval offered before the session entered plan mode cannot make a write run while planning."""
        refusal = await self.plan_refusal(job)
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

    async def decide(self, job: CallJob) -> PolicyDecision:
        """The policy's decision on the job's input, an ask already made a deny where nobody is asked."""
        decision = await self.judge(facts_of(job), job.raw, job.run)
        return self.cleaned(self.policy_for(job.run).resolve_ask(decision, job.run.session_id))

    def resolve_ask(self, job: CallJob, asked: PolicyDecision) -> PolicyDecision:
        """A hook's ask, a deny where the session's mode asks nobody."""
        return self.cleaned(self.policy_for(job.run).resolve_ask(asked, job.run.session_id))

    def cleaned(self, decision: PolicyDecision) -> PolicyDecision:
        """The policy judged the raw input: what it says goes on the record, so it is redacted."""
        reason, prov = self._clean(decision.reason), self.cleaned_provenance(decision.provenance)
        if reason == decision.reason and prov is decision.provenance:
            return decision
        return replace(decision, reason=reason, provenance=prov)

    def cleaned_provenance(self, prov: Provenance) -> Provenance:
        detail = self._clean(prov.detail)
        return prov if detail == prov.detail else replace(prov, detail=detail)

    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if text else text

    async def judge(self, facts: ToolFacts, input: dict[str, Any], run: RunContext) -> PolicyDecision:
        """The policy's decision on `input`, judged on a worker thread with the paths it judges resolved
        in the sandbox; past the deadline, an ask with risk high (never an allow). The deadline runs
        twice: for asking the policy which paths it judges, then for resolving them and judging; a
        sandbox that is still starting gets its own time in between (starting is not judging)."""
        policy, sid, sandbox = self.policy_for(run), run.session_id, run.sandbox

        def first() -> tuple[list[str], PolicyDecision | None]:  # one thread hop when no path needs resolving
            paths = policy.paths_to_resolve(facts, input)
            return paths, (None if paths else policy.evaluate(facts, input, session_id=sid))

        try:
            async with asyncio.timeout(self.deadline_s):
                paths, decision = first() if self.judged_inline(input, policy) else await self.off_loop(first)
            if decision is not None:
                return decision
            failure = await _started(sandbox)
            async with asyncio.timeout(self.deadline_s):
                resolved, failure = (None, failure) if failure else await self.resolve(paths, sandbox)
                decision = await self.off_loop(partial(policy.evaluate, facts, input, session_id=sid,
                                                       resolved=resolved))
        except TimeoutError:
            return _not_in_time(self.deadline_s)
        if not failure or decision.action is Action.DENY:
            return decision
        reason = failure if decision.action is Action.ALLOW else f"{decision.reason}; {failure}"
        return PolicyDecision(Action.ASK, Provenance("sandbox", "path resolution", decision="ask"), reason,
                              Risk.HIGH)

    async def plan_refusal(self, job: CallJob) -> PolicyDecision | None:
        """Plan mode's denial of the job's input as it will run; None when it may go on (or no plan)."""
        sid = job.run.session_id
        if self.policy.mode_for(sid) is not PermissionMode.PLAN:
            return None
        return await self.off_loop(partial(self.policy.plan_refusal, facts_of(job), job.raw, sid))

    def judged_inline(self, input: dict[str, Any], policy: Policy | None = None) -> bool:
        """A policy whose judging is bounded (the built-in one), on a small input, is judged on the loop: a
        command of INLINE_JUDGE_CHARS takes a fraction of a millisecond, where a thread hop costs more than
        the judging. Any other policy, or a larger input, is judged on a worker thread under the deadline."""
        small = text_size(input, INLINE_JUDGE_CHARS) <= INLINE_JUDGE_CHARS
        return small and (self.policy if policy is None else policy).judges_inline(input)

    async def off_loop(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn)

    async def resolve(self, paths: list[str], sandbox: Sandbox | None) -> tuple[dict[str, str] | None, str]:
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


def _not_in_time(deadline_s: float) -> PolicyDecision:
    return PolicyDecision(Action.ASK, Provenance("deadline", f"{deadline_s:g} s", decision="ask"),
                          NOT_JUDGED_IN_TIME, Risk.HIGH)


async def _started(sandbox: Sandbox | None) -> str:
    """"" once `sandbox` runs (a Docker sandbox may still be creating its container), else why not."""
    if sandbox is None:
        return ""
    try:
        await sandbox.start()
    except Exception as e:  # any failure: the paths cannot be resolved, so the call asks
        return f"the sandbox could not start to resolve the paths: {e}"
    return ""
