"""The record's transitions, durable first: every state is in the store before its events are published."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import _reasons as reasons
from ._bus import EventBus
from ._errors import StoreError
from ._events import Event, StateChanged, ToolEnd, ToolError, ToolExecuted, ToolStart
from ._messages import StoredMessage, ToolCall, sealed_result
from ._record import AuditEntry, Outcome, ToolCallRecord, ToolCallState
from ._store import RecordStore
from ._tool import ToolResult

SESSION_ENDED = "the session ended while it was open"


@dataclass(slots=True)
class HeldFinal:
    """A call's final transition held back to ride with the tool-result message that carries its result: one
    commit for both. Its entries are written, then its events published (`release`), once that commit is durable."""

    record: ToolCallRecord
    entries: list[AuditEntry]
    events: list[Event] = field(default_factory=list)
    then: list[Callable[[], None]] = field(default_factory=list)  # publishing that waits for the commit too


@dataclass(slots=True)
class LeadMessage:
    """The model's message that asked for a batch of calls, written in one commit with the batch's first write
    (before it in the chain): no call of the batch is durable, so none runs, before the message that asked for
    it, and a step costs one commit less. `written` is set by the write that carries it."""

    message: StoredMessage
    written: asyncio.Future[None] | None = None


class RecordWriter:
    """Moves records through their states: the executor's only way to change one."""

    def __init__(self, store: RecordStore, bus: EventBus, summarize: Callable[[ToolCallRecord], str]) -> None:
        self.store = store
        self.bus = bus
        self.summarize = summarize  # the one-line summary a ToolEnd carries
        # A new record's PENDING entry rides along with its next transition (one commit, not two);
        # its events are published once both are durable.
        self._unsaved: dict[str, tuple[AuditEntry, list[Event]]] = {}
        self._leads: dict[str, LeadMessage] = {}  # by session: the message its running batch's first write carries

    def lead(self, message: StoredMessage) -> LeadMessage:
        """Carry `message` with the first write of its session's next batch (see LeadMessage); `settle` it after."""
        lead = LeadMessage(message)
        self._leads[message.session_id] = lead
        return lead

    def drop(self, lead: LeadMessage) -> None:
        """No later write carries `lead` (its batch is over)."""
        if self._leads.get(lead.message.session_id) is lead:
            del self._leads[lead.message.session_id]

    async def settle(self, lead: LeadMessage) -> None:
        """After the batch: the lead is durable (written here when no write of the batch carried it, as when each
        call's result came back before any state of it was written). Raises StoreError when the store refused it."""
        self.drop(lead)
        if lead.written is None:
            lead.written = _outcome_of(asyncio.ensure_future(self.store.append_message(lead.message)))
        await asyncio.shield(lead.written)

    def create(self, record: ToolCallRecord, call: ToolCall) -> None:
        """Start the trail at PENDING; it is written with the record's next transition."""
        entry = AuditEntry(record.id, ToolCallState.PENDING, record.created_at, "model", "tool_use received",
                           {"raw_input": call.raw_input} if call.parse_error else {})
        record.trail.append(entry)
        events: list[Event] = [
            ToolStart(session_id=record.session_id, call_id=record.id, tool_use_id=record.tool_use_id,
                      name=record.name, input=record.input, partial=False),
            StateChanged(session_id=record.session_id, call_id=record.id, name=record.name,
                         state=ToolCallState.PENDING.value, actor="model"),
        ]
        self._unsaved[record.id] = (entry, events)

    def forget(self, record: ToolCallRecord) -> None:
        """Drop what waits for a write that will not come (the call is over)."""
        self._unsaved.pop(record.id, None)

    async def persist(self, record: ToolCallRecord, entry: AuditEntry) -> None:
        """Make `entry` (and a deferred PENDING entry) durable, then publish what waited for it. The first write of
        a batch carries the batch's lead message (see LeadMessage); the others wait until it is durable, and
        fail with it."""
        lead = self._leads.get(record.session_id)
        if lead is not None and lead.written is not None:
            await asyncio.shield(lead.written)
            lead = None
        deferred = self._unsaved.pop(record.id, None)
        try:
            if lead is not None:
                # A task of its own, so a call cancelled while it writes leaves the write's outcome to the calls
                # and the turn that wait for it (the writer goes on with it either way).
                pairs = [(record, e) for e in ((deferred[0], entry) if deferred is not None else (entry,))]
                write = asyncio.ensure_future(self.store.append_message(lead.message, pairs, first=True))
                lead.written = _outcome_of(write)
                await asyncio.shield(write)
            elif deferred is None:
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

    async def note(self, record: ToolCallRecord, actor: str, note: str, data: dict[str, Any] | None = None) -> None:
        """Add an entry in the current state (an input rewritten, an output redacted) and make it durable."""
        record.trail.append(AuditEntry(record.id, record.state, time.time(), actor, note, data or {}))
        await self.persist(record, record.trail[-1])

    async def move(self, record: ToolCallRecord, to: ToolCallState, *, actor: str, note: str = "",
                   outcome: Outcome | None = None, data: dict[str, Any] | None = None,
                   hold: list[HeldFinal] | None = None) -> None:
        """Transition, make it durable, then publish. A failed write undoes the transition in memory. With
        `hold`, the transition (and a deferred PENDING entry) is held there for its caller to write and release."""
        if hold is not None:
            previous = record.state
            entry = record.transition(to, actor=actor, note=note, outcome=outcome, data=data)
            deferred = self._unsaved.pop(record.id, None)
            held = HeldFinal(record, [entry]) if deferred is None else HeldFinal(record, [deferred[0], entry],
                                                                                 list(deferred[1]))
            held.events.append(StateChanged(session_id=record.session_id, call_id=record.id, name=record.name,
                                            state=to.value, previous=previous.value, actor=actor, note=note))
            hold.append(held)
            return
        snapshot = (record.state, record.outcome, record.updated_at, record.started_at,
                    record.completed_at, record.duration_ms)
        previous = record.state
        entry = record.transition(to, actor=actor, note=note, outcome=outcome, data=data)
        try:
            await self.persist(record, entry)
        except BaseException:
            (record.state, record.outcome, record.updated_at, record.started_at,
             record.completed_at, record.duration_ms) = snapshot
            record.trail.remove(entry)
            raise
        self.bus.publish(StateChanged(session_id=record.session_id, call_id=record.id, name=record.name,
                                      state=to.value, previous=previous.value, actor=actor, note=note))

    async def fail(self, record: ToolCallRecord, error: str, outcome: Outcome, *, actor: str,
                   recs: list[str] | None = None, data: dict[str, Any] | None = None) -> None:
        record.error, record.is_error = error, True
        if record.result is None or not record.result.get("is_error"):
            record.result = ToolResult.error(error, recs).to_dict()
        await self.move(record, ToolCallState.FAILED, actor=actor, note=error, outcome=outcome, data=data)
        self.bus.publish(ToolError(session_id=record.session_id, call_id=record.id, name=record.name, error=error))
        self.publish_end(record)

    async def deny(self, record: ToolCallRecord, note: str, outcome: Outcome, *, actor: str,
                   data: dict[str, Any] | None = None) -> None:
        record.error, record.is_error = note, True
        if record.result is None:
            recs = ["Do not retry the same call; ask the user or take another approach."]
            record.result = ToolResult.error(note, recs).to_dict()
        await self.move(record, ToolCallState.DENIED, actor=actor, note=note, outcome=outcome, data=data)
        self.publish_end(record)

    async def finish(self, record: ToolCallRecord, result: ToolResult, data: dict[str, Any] | None = None, *,
                     hold: list[HeldFinal] | None = None) -> None:
        """The tool's (post-hooked) result is final: COMPLETED, or FAILED when it reports an error. With `hold`,
        its transition and events wait there for the tool-result message (see HeldFinal)."""
        record.result = result.to_dict()
        record.is_error = result.is_error
        if result.is_error:
            record.error = result.error_text[:2000]
            await self.move(record, ToolCallState.FAILED, actor="executor", note=reasons.TOOL_REPORTED_ERROR,
                            outcome=Outcome.ERROR, data=data, hold=hold)
        else:
            await self.move(record, ToolCallState.COMPLETED, actor="executor", outcome=Outcome.OK, data=data,
                            hold=hold)
        if hold is not None:
            hold[-1].then.append(lambda: self.publish_end(record))
        else:
            self.publish_end(record)

    def release(self, held: list[HeldFinal]) -> None:
        """The held transitions are durable now: publish what waited for them, in order."""
        for h in held:
            for event in h.events:
                self.bus.publish(event)
            for then in h.then:
                then()

    async def seal(self, record: ToolCallRecord, *, reason: str = SESSION_ENDED, note: str = "session reopened",
                   summary: str = "sealed on reopen") -> None:
        """A call a reopened session found open, that may have run: SEALED, with a result that says so."""
        block = sealed_result(record.tool_use_id or record.id, reason, state_when_sealed=record.state.value)
        record.error = json.loads(block["content"][0]["text"])["error"]
        record.result = {**ToolResult.error(record.error).to_dict(), "content": block["content"]}
        record.is_error = True
        await self.move(record, ToolCallState.SEALED, actor="system", note=note, outcome=Outcome.SEALED)
        self.bus.publish(
            ToolEnd(session_id=record.session_id, call_id=record.id, name=record.name,
                    state=record.state.value, outcome=Outcome.SEALED.value, is_error=True,
                    summary=summary, reason=record.error or "")
        )

    def unrecorded(self, record: ToolCallRecord, exc: StoreError) -> ToolCallRecord:
        """The store refused a write: the call stops here, visibly (in memory and on the bus) but unrecorded."""
        msg = reasons.unrecorded(str(exc))
        if not record.terminal:
            record.state, record.outcome = ToolCallState.FAILED, Outcome.ERROR
        record.error, record.is_error = msg, True
        record.result = ToolResult.error(msg, ["Retry once the audit database is writable again."]).to_dict()
        self.bus.publish(ToolError(session_id=record.session_id, call_id=record.id, name=record.name, error=msg))
        # Not ToolExecuted: that one is stored, and the store is what just failed.
        self.bus.publish(ToolEnd(session_id=record.session_id, call_id=record.id, name=record.name,
                                 state=record.state.value, outcome=Outcome.ERROR.value, is_error=True,
                                 summary="not recorded", reason=msg))
        return record

    def publish_end(self, record: ToolCallRecord) -> None:
        summary = self.summarize(record)
        outcome = record.outcome.value if record.outcome else None
        self.bus.publish(ToolEnd(session_id=record.session_id, call_id=record.id, name=record.name,
                                 state=record.state.value, outcome=outcome,
                                 is_error=record.is_error, duration_ms=record.duration_ms, summary=summary,
                                 exit_code=_exit_code(record),
                                 reason=(record.error or "") if record.is_error else ""))
        self.bus.publish(ToolExecuted(session_id=record.session_id, call_id=record.id, name=record.name,
                                      state=record.state.value, outcome=outcome,
                                      duration_ms=record.duration_ms, sandbox=record.sandbox,
                                      approval=approval_of(record)))


def _outcome_of(write: asyncio.Future[int]) -> asyncio.Future[None]:
    """A future that ends as the lead's `write` ends: done, or failed with its error (a StoreError when the write
    itself was cancelled, as at shutdown: whether it committed is not known here). Its error is marked retrieved:
    a batch with no other call must not have it logged as never retrieved."""
    out: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done(w: asyncio.Future[int]) -> None:
        if w.cancelled():
            out.set_exception(StoreError("the write of the model's message was cancelled"))
        elif w.exception() is not None:
            out.set_exception(w.exception())  # type: ignore[arg-type]
        else:
            out.set_result(None)
        out.exception()

    write.add_done_callback(done)
    return out


def _exit_code(record: ToolCallRecord) -> int | None:
    code = ((record.result or {}).get("details") or {}).get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def approval_of(record: ToolCallRecord) -> dict[str, Any]:
    """Who or what let the call run (or stopped it): the person's answer when one was asked, else the last
    decision of the policy or a hook. {"by", "detail", "decision", "source"}; empty when nothing decided."""
    ap = record.approval
    if ap.decision is not None:
        return {"by": "person", "detail": ap.decided_by or "", "decision": ap.decision, "source": "",
                "note": ap.note, "edited": ap.edited_input is not None}
    decided = [p for p in record.provenance if p.decision in ("allow", "deny")]
    if not decided:
        return {}
    p = decided[-1]
    return {"by": p.kind, "detail": p.detail, "decision": p.decision, "source": p.source}


PROCESS_GONE = "the process that ran it ended"


async def seal_calls(store: RecordStore, bus: EventBus, records: list[ToolCallRecord]) -> None:
    """Seal open calls whose process is gone (found at start-up, not on a reopen): each one SEALED, in the
    audit trail and on the bus, with a result that warns the model of side effects."""
    writer = RecordWriter(store, bus, lambda r: r.name)
    for record in records:
        await writer.seal(record, reason=PROCESS_GONE, note="the process that ran it ended",
                          summary="interrupted: the app's process ended")
