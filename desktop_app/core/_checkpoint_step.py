"""The executor's checkpoint step: before a call that may write (every call the policy does not prove only
reads) the workspace is recorded (`_checkpoints.py`); a checkpoint that cannot be taken makes the call ask,
with the reason, and never lets it run unrecorded."""

from __future__ import annotations

import asyncio
from typing import Any

from ._checkpoints import Checkpoint, CheckpointError, ShadowStore
from ._judge import facts_of
from ._record import Provenance, Risk, highest_risk
from ._run import CallJob
from .policy import Action, PolicyDecision, plan_mode_blocker


def may_write(job: CallJob) -> bool:
    """Whether the call may change a file: all but a trusted read-only tool, the person's tools, the todo
    list, and a command every part of which only reads (plan mode's judgement)."""
    return plan_mode_blocker(facts_of(job), job.raw) is not None


def no_checkpoint(error: CheckpointError) -> str:
    return f"no checkpoint of the workspace can be taken ({error}), so a rewind could not undo this call"


async def take(store: ShadowStore) -> Checkpoint:
    return await asyncio.to_thread(store.take)


async def checkpoint_before(store: ShadowStore | None, job: CallJob) -> PolicyDecision | None:
    """Record the workspace before `job` runs, in `job.checkpoint`; an ASK with the reason when it cannot
    be (the caller resolves it like a hook's ask); None when it was recorded or nothing needs recording."""
    if store is None or not may_write(job):
        return None
    try:
        job.checkpoint = await take(store)
    except CheckpointError as e:
        job.meta["checkpoint"] = no_checkpoint(e)
        return PolicyDecision(Action.ASK, Provenance("checkpoint", "not taken", decision="ask"),
                              no_checkpoint(e), Risk.MEDIUM)
    return None


def asked(job: CallJob, decision: PolicyDecision) -> None:
    job.asks.append(decision.reason)
    job.risk = highest_risk(job.risk, decision.risk)


async def again_before_run(store: ShadowStore | None, job: CallJob) -> str:
    """A call that waited for a person is recorded again just before it runs (the files may have changed
    meanwhile); "" or why the earlier checkpoint stands."""
    if store is None or job.checkpoint is None or job.record.approval.decision is None:
        return ""
    try:
        job.checkpoint = await take(store)
    except CheckpointError as e:
        return f"the checkpoint taken before the approval stands: {e}"
    return ""


async def after_run(store: ShadowStore | None, job: CallJob) -> dict[str, Any] | None:
    """The workspace once a checkpointed call ended, for the terminal entry: the person's changes are told
    from the desk's by it at a rewind. None when the call had no checkpoint."""
    if store is None or job.checkpoint is None:
        return None
    try:
        job.checkpoint_after = await take(store)
    except CheckpointError as e:
        return {"checkpoint_after": {"error": str(e)}}
    return {"checkpoint_after": job.checkpoint_after.to_dict()}
