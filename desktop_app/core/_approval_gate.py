"""A call before a person: its dry run for the card, its offer as an approval, the person's answer on its
record (a deny stops the batch, an allow moves it to APPROVED, maybe with an "always" rule)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from . import _reasons as reasons
from ._approvals import SKIPPER, Allow, Deny, PendingApprovals
from ._bus import EventBus
from ._errors import ToolInputError
from ._events import PermissionDecided
from ._hooks import redact_off_loop
from ._judge import Judge
from ._record import Outcome, Provenance, ToolCallState
from ._recorder import RecordWriter
from ._redaction import Redactor
from ._run import CallJob
from ._tool_context import tool_context

DRY_RUN_DEADLINE_S = 10.0  # a dry run (a file read and a diff) past this asks without its preview
MAX_CARD_DIFF_CHARS = 400_000  # a longer diff is not put on the card's record (the call's result keeps it)
# judges a person's edit of the call (its restored input) and ends in the call's approval, or not
EditJudge = Callable[[CallJob, Allow, Provenance, dict[str, Any]], Awaitable[bool]]
SHOWN_REDACTED = "secrets in this input are shown as [REDACTED] (they run as written)"


class ApprovalGate:
    """Offers calls to a person through `approvals` and records their answers."""

    def __init__(self, bus: EventBus, recorder: RecordWriter, approvals: PendingApprovals, judge: Judge,
                 redactor: Redactor, *, person: Any, judge_edit: EditJudge) -> None:
        self.bus, self.recorder, self.approvals, self.judge = bus, recorder, approvals, judge
        self.redactor = redactor
        self.person = person  # a core.PendingQuestions, for the dry run's tool context
        self.judge_edit = judge_edit  # the executor judges a person's edit again, like the model's input

    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if text else text

    async def dry_run(self, job: CallJob, *, always: bool = False) -> bool:
        """Before a person is asked (or `always`, for a person's edit): the call is tried without effect,
        a file edit against the file as it is now. A call bound to fail fails here, with the reason sent to
        the model and kept in the audit, and nobody is asked; what it would change goes on the card."""
        if not job.asks and not always:
            return True  # nobody is asked: the tool checks the same things when it runs
        record, tool = job.record, job.known
        try:
            async with asyncio.timeout(DRY_RUN_DEADLINE_S):
                preview = await tool.dry_run(job.args, tool_context(job, self.bus, self.redactor, self.person))
        except ToolInputError as e:
            await self.recorder.fail(record, self._clean(reasons.would_fail(tool.name, str(e))),
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

    async def ask(self, job: CallJob) -> bool:
        """The pipeline's approval step: when something asks, the call waits for a person's allow."""
        return not await self.offer(job) or await self.await_answer(job)

    async def await_answer(self, job: CallJob) -> bool:
        """Wait for the person: True once the call (or the edit they allowed) is APPROVED."""
        answer = await self.answer(job)
        if answer is None:
            return False
        decision, prov = answer
        edited = decision.edited_input
        if edited is not None and edited != job.record.input:
            return await self.judge_edit(job, decision, prov, _restore(edited, job.record.input, job.raw))
        job.args = job.known.parse(job.raw)
        return await self.approve(job, decision, prov)

    async def offer(self, job: CallJob) -> bool:
        """Offer the call to a person when something asks (True); False when nothing does."""
        record = job.record
        record.risk = job.risk
        reason = "; ".join(x for x in job.asks if x)
        if not reason:
            return False
        if job.raw is not record.input:  # the person sees the input as stored: say what they cannot see
            reason += f"; {SHOWN_REDACTED}"
            job.meta["redacted"] = True
        self.approvals.register(record, job.batch, reason=reason, meta={**job.meta, **job.run.labels})
        await self.recorder.move(record, ToolCallState.APPROVAL_REQUIRED, actor="policy", note=reason,
                                 data={"risk": job.risk, "provenance": [p.to_dict() for p in record.provenance]})
        self.approvals.announce(record)
        return True

    async def offer_again(self, job: CallJob) -> bool:
        """Offer an edited input to a person once more, with its own risk and reasons; False when an earlier
        call of the batch was denied (the call is skipped)."""
        record = job.record
        if job.batch.denied_by_user:
            await self.skip(job)
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
        return True

    async def answer(self, job: CallJob) -> tuple[Allow, Provenance] | None:
        """The person's allow; None when they denied it, the approval expired or the run stopped (recorded)."""
        record, run = job.record, job.run
        decision = await self.approvals.wait(record, run.abort, job.batch)
        if decision is None:
            if run.abort.is_set():
                await self.recorder.fail(record, reasons.STOPPED_WAITING, Outcome.INTERRUPTED, actor="user")
            else:
                await self.recorder.deny(record, reasons.APPROVAL_EXPIRED, Outcome.EXPIRED, actor="system")
            return None
        if isinstance(decision, Deny) and decision.by == SKIPPER:  # another call of the batch was denied
            await self.skip(job)
            return None
        prov = self.approvals.record_answer(record, decision)
        if isinstance(decision, Deny):
            await self._denied(job, decision, prov)
            return None
        return decision, prov

    async def _denied(self, job: CallJob, decision: Deny, prov: Provenance) -> None:
        record = job.record
        if not job.batch.denied_by_user:
            job.batch.denied_by_user, job.batch.denied_tool, job.batch.denied_by = True, record.name, decision.by
        note = reasons.denied_by_person(decision.by, self._clean(decision.note))
        await self.recorder.deny(record, note, Outcome.USER, actor=decision.by, data={"provenance": prov.to_dict()})
        self.bus.publish(PermissionDecided(session_id=record.session_id, call_id=record.id, decision="deny",
                                           decided_by=decision.by, note=decision.note))
        # The rest of the batch does not run: calls still waiting are skipped too.
        self.approvals.skip_waiting(job.batch)

    async def approve(self, job: CallJob, decision: Allow, prov: Provenance) -> bool:
        """The call is APPROVED (an "always" rule remembered); False when an earlier call of the batch was
        denied meanwhile (the call is skipped)."""
        record = job.record
        data: dict[str, Any] = {"provenance": prov.to_dict(), "scope": str(decision.scope)}
        if job.original_input is not None:  # the audit keeps both: what the model asked, what ran
            data.update(original_input=job.original_input, edited_input=record.approval.edited_input)
        rule = await self.judge.off_loop(partial(self.approvals.rule_for, record, decision))
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
            await self.skip(job)
            return False
        return True

    async def skip(self, job: CallJob) -> None:
        """The person denied an earlier call of the batch: this one is skipped, recorded as such (DENIED,
        outcome skipped), naming the call they denied. The risk it may have been shown with stays in the
        audit; the views and the export show none, since the call was never judged on its own."""
        batch = job.batch
        note = reasons.skipped(batch.denied_tool, batch.denied_by)
        await self.recorder.deny(job.record, note, Outcome.SKIPPED, actor=SKIPPER,
                                 data={"after_denial_of": batch.denied_tool})


def _restore(edited: dict[str, Any], shown: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """A person edits the input as shown, redacted: a field they left as shown runs with its raw value."""
    return {k: raw[k] if k in raw and k in shown and v == shown[k] else v for k, v in edited.items()}
