"""Running an approved call's tool, the pipeline's last step: where it runs, its deadline and abort, the
workspace sync around it, and its result through the post hooks (the tool's own -> the person's -> the
chain's own: redaction, then truncation) to the record."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

from . import _reasons as reasons
from ._bus import EventBus
from ._checkpoint_step import after_run, again_before_run
from ._checkpoints import ShadowStore
from ._errors import AgentDeskError
from ._events import ErrorEvent
from ._hooks import HookChain
from ._record import Outcome, ToolCallRecord, ToolCallState
from ._recorder import RecordWriter
from ._redaction import Redactor
from ._result_cache import ResultCache
from ._run import CallJob
from ._tool import TextBlock, ToolResult
from ._tool_context import flush_updates, tool_context
from ._workspace_sync import SyncOutcome, sync_step

DEFAULT_TOOL_TIMEOUT_S = 120.0
APPROVAL_NOTE_PREFIX = "The user approved this call with a note: "


class ToolRunner:
    """Runs the tools of approved calls and finishes their records; counts the calls writing now."""

    def __init__(self, bus: EventBus, recorder: RecordWriter, redactor: Redactor, hooks: HookChain, *,
                 person: Any, default_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> None:
        self.bus, self.recorder, self.redactor, self.hooks = bus, recorder, redactor, hooks
        self.person = person  # a core.PendingQuestions, for the tools that ask the person
        self.default_timeout_s = default_timeout_s
        self.user_hooks = HookChain()  # the person's hooks (settings, a granted hooks file): replaced whole
        # Calls that may write, running now, and when the last one ended: the file watcher tells the
        # person's changes from the tools' by them (monotonic seconds).
        self.writing = 0
        self.last_write_end = 0.0
        self.cache = ResultCache()  # results of cacheable read-only tools, stale once anything may write
        self.checkpoints: ShadowStore | None = None  # the workspace recorded around each call that may write
        # The records whose tool runs now, by id: the network proxy names the call a connection came from.
        self.executing: dict[str, ToolCallRecord] = {}

    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if text else text

    async def run(self, job: CallJob) -> None:
        record, tool, run = job.record, job.known, job.run
        if run.abort.is_set():
            await self.recorder.fail(record, reasons.STOPPED_BEFORE_RUN, Outcome.INTERRUPTED, actor="user")
            return
        with contextlib.suppress(Exception):  # where it runs: the session's sandbox, or the tool's own place
            where_run = tool.where(run.sandbox)
            if where_run is not None:
                record.sandbox = where_run.to_dict()
        where: dict[str, Any] = {"sandbox": record.sandbox} if record.sandbox else {}
        ttl = tool.cache_ttl_s if tool.read_only else None
        if await self._from_cache(job, where, ttl):
            return
        if not tool.read_only:
            self.cache.changed()
        stale = await again_before_run(self.checkpoints, job)
        if job.checkpoint is not None:  # the id is in the record and the chain: a rewind starts from it
            where["checkpoint"] = {**job.checkpoint.to_dict(), **({"note": stale} if stale else {})}
        await self.recorder.move(record, ToolCallState.EXECUTING, actor="executor", data=where or None)
        ctx = tool_context(job, self.bus, self.redactor, self.person)
        timeout = tool.timeout_for(job.args) or self.default_timeout_s
        ctx.deadline = time.monotonic() + timeout
        before = await self._sync(job, "in")
        if before.failed:
            await self.recorder.fail(record, before.text, Outcome.ERROR, actor="executor",
                                     recs=["Retry once the engine answers; nothing ran."])
            return
        task = asyncio.ensure_future(tool.run(job.args, ctx))
        self.writing += not tool.read_only
        self.executing[record.id] = record
        try:
            in_time = await _finished_in_time(task, run.abort, timeout)
            flush_updates(job, self.bus)
            # Even a call that failed or was cancelled may have changed files: they come back all the same.
            after = await self._sync(job, "both") if not tool.read_only else before
        finally:  # the files it wrote (and the sync brought back) are the tool's, not the person's
            self.executing.pop(record.id, None)
            if not tool.read_only:
                self.writing -= 1
                self.last_write_end = time.monotonic()
                self.cache.changed()
        job.meta["after"] = await after_run(self.checkpoints, job)
        if not in_time:
            await self._late(job, timeout)
            return
        result = await self._tool_result(job, task)
        if result is not None and ttl and not result.is_error:
            self.cache.put(tool.name, job.raw, result, record.id)
        if result is not None:
            notes = "\n".join(t for t in {before.text: 0, after.text: 0} if t)
            if notes:  # the model learns of a conflict in the same result that caused it
                result = replace(result, content=[*result.content, TextBlock(f"\nworkspace sync:\n{notes}")])
            await self.finish(job, result)

    async def _from_cache(self, job: CallJob, where: dict[str, Any], ttl: float | None) -> bool:
        """Answer the call with the same call's cached result (the workspace unchanged since), recorded as such."""
        hit = self.cache.get(job.known.name, job.raw, ttl) if ttl else None
        if hit is None:
            return False
        await self.recorder.move(job.record, ToolCallState.EXECUTING, actor="executor",
                                 note=f"from cache: the result of {hit.call_id}",
                                 data={**where, "from_cache": hit.call_id})
        await self.finish(job, hit.result)
        return True

    async def _late(self, job: CallJob, limit_s: float) -> None:
        """The tool did not end: a person stopped it, or its time ran out."""
        after = job.meta.get("after")
        if job.run.abort.is_set():
            await self.recorder.fail(job.record, reasons.STOPPED_RUNNING, Outcome.INTERRUPTED, actor="user",
                                     data=after)
        else:
            await self.recorder.fail(job.record, reasons.timed_out(job.known.name, limit_s),
                                     Outcome.TIMEOUT, actor="executor",
                                     recs=["Use a shorter command, or a larger timeout if the tool takes one."],
                                     data=after)

    async def _sync(self, job: CallJob, direction: str) -> SyncOutcome:
        """A synced workspace brought up to date (see core/_workspace_sync.py); what went wrong is noted in
        the record's trail and published as an ErrorEvent, so the person sees it too."""
        outcome = await sync_step(job.run.sandbox, direction)
        if outcome.text:
            text = self._clean(outcome.text)
            await self.recorder.note(job.record, "workspace sync", text)
            self.bus.publish(ErrorEvent(session_id=job.record.session_id, source="workspace sync", message=text,
                                        phase="tool", severity="error" if outcome.failed else "warn"))
        return outcome

    async def _tool_result(self, job: CallJob, task: asyncio.Future[Any]) -> ToolResult | None:
        """What the finished tool returned, as a ToolResult; None when it raised (the call has failed)."""
        name = job.known.name
        try:
            out = task.result()
        except AgentDeskError as e:
            await self.recorder.fail(job.record, self._clean(reasons.tool_failed(name, str(e))), Outcome.ERROR,
                                     actor="executor", recs=[self._clean(e.hint)] if e.hint else [],
                                     data=job.meta.get("after"))
            return None
        except Exception as e:
            await self.recorder.fail(job.record, self._clean(reasons.tool_raised(name, type(e).__name__, str(e))),
                                     Outcome.ERROR, actor="executor",
                                     recs=["Check the input, or try another approach."], data=job.meta.get("after"))
            return None
        return out if isinstance(out, ToolResult) else ToolResult.text(str(out))

    async def finish(self, job: CallJob, result: ToolResult) -> None:
        """`result` (the tool's, or a pre hook's standing in for it) through the post hooks to the record."""
        record = job.record
        first = HookChain(post=[*job.known.post_hooks(), *self.user_hooks.post])
        verdict = await first.run_post(job.hook_call, result) if first.post else None
        if verdict is None or not verdict.error:  # then redaction and truncation, over what those hooks added
            changes = verdict.changes if verdict else []
            verdict = await self.hooks.run_post(job.hook_call, verdict.result if verdict else result)
            verdict.changes[:0] = changes
        for hook, note in verdict.changes:
            await self.recorder.note(record, f"hook:{hook}", self._clean(note))
        after = job.meta.get("after")
        if verdict.error:
            await self.recorder.fail(record, verdict.error, Outcome.ERROR, actor=f"hook:{verdict.failed_hook}",
                                     data=after)
            return
        result = verdict.result
        told = []
        if job.original_input is not None:  # the model learns that what ran is not what it sent, and how
            told.append(TextBlock("\n" + reasons.edit_note(job.original_input, record.input,
                                                           record.approval.decided_by or reasons.PERSON)))
        if job.approval_note:  # "yes, but...": the model reads the person's note with the result
            told.append(TextBlock(f"\n{APPROVAL_NOTE_PREFIX}{job.approval_note}"))
        if told:
            result = replace(result, content=[*result.content, *told])
        await self.recorder.finish(record, result, data=after, hold=job.hold.take(record.id) if job.hold else None)


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
