"""Approvals as data: a person's answer to a call that waits in APPROVAL_REQUIRED, and the calls that wait.

A front end (the window's inbox, the CLI's prompt) answers `Executor.decide(call_id, Allow(...) | Deny(...))`
with these types as they are; nothing is copied field for field.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Literal, Protocol

from ._bus import EventBus
from ._errors import ApprovalNotPending
from ._events import PermissionRequired
from ._policy import Action, PermissionPolicy, Rule, suggest_rule
from ._record import Provenance, ToolCallRecord


class ApprovalScope(StrEnum):
    """How far an allow reaches: this call, the rest of the session, or the project's rules file."""

    ONCE = "once"
    SESSION = "session"
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call. `edited_input` replaces its input (validated again, recorded); for SESSION and
    ALWAYS, `rule` is the rule text to add (default: the rule the policy suggests for the call)."""

    scope: ApprovalScope = ApprovalScope.ONCE
    edited_input: dict[str, Any] | None = None
    rule: str | None = None
    by: str = "user"
    note: str = ""
    kind: ClassVar[Literal["allow"]] = "allow"


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the note goes back to the model with the denial."""

    note: str = ""
    by: str = "user"
    kind: ClassVar[Literal["deny"]] = "deny"


ApprovalDecision = Allow | Deny


SKIPPED_AFTER_DENIAL = "skipped after a denial"


def visible(text: str) -> str:
    """`text` as a person must see it before allowing it: every character that a terminal or a widget
    would not show as itself (carriage return, escape sequences, bidi overrides, exotic blanks, tabs)
    written as an escape such as `\\r` or `\\u202e`; newlines stay line breaks. Nothing is dropped."""
    if text.isprintable() or all(ch.isprintable() or ch == "\n" for ch in text):
        return text
    return "".join(ch if ch.isprintable() or ch == "\n" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    named = {"\t": "\\t", "\r": "\\r"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class RuleWriter(Protocol):
    """Persists an "always allow" rule to the project's rules file (the front end previews it first)."""

    def __call__(self, rule: Rule) -> None: ...


@dataclass(slots=True)
class Batch:
    """What the calls of one batch share: once a person denies one of them, the others are skipped."""

    denied_by_user: bool = False
    waiting: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Waiting:
    record: ToolCallRecord
    future: asyncio.Future[ApprovalDecision]
    batch: Batch | None


class PendingApprovals:
    """The calls that wait in APPROVAL_REQUIRED, by id: offered, answered in any order, expired or
    abandoned, offered again after a restart; and the rules an answer adds."""

    def __init__(self, bus: EventBus, policy: PermissionPolicy, *, timeout_s: float | None = None) -> None:
        self.bus = bus
        self.policy = policy
        self.timeout_s = timeout_s
        self.rule_writer: RuleWriter | None = None
        self._waiting: dict[str, _Waiting] = {}

    # -- what a front end uses ----------------------------------------------------------------------
    def decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer a waiting call; ApprovalNotPending when it does not wait (expired, answered, unknown)."""
        waiting = self._waiting.get(call_id)
        if waiting is None or waiting.future.done():
            raise ApprovalNotPending(f"no tool call {call_id} is waiting for approval")
        waiting.future.set_result(decision)

    def pending(self) -> list[ToolCallRecord]:
        return [w.record for w in self._waiting.values() if not w.future.done()]

    # -- what the executor uses ---------------------------------------------------------------------
    def register(self, record: ToolCallRecord, batch: Batch | None, *, reason: str = "",
                 meta: dict[str, Any] | None = None) -> None:
        """Start waiting for an answer for `record` (before its APPROVAL_REQUIRED is written, so an
        answer that comes at once finds it)."""
        if reason:
            record.approval.required = True
            record.approval.meta = {"reason": reason, **(meta or {})}
            if self.timeout_s is not None:
                record.approval.expires_at = time.time() + self.timeout_s
        fut: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._waiting[record.id] = _Waiting(record, fut, batch)
        if batch is not None:
            batch.waiting.add(record.id)

    def announce(self, record: ToolCallRecord) -> None:
        """Tell the front ends that `record` waits (once its APPROVAL_REQUIRED is durable)."""
        self.bus.publish(PermissionRequired(
            session_id=record.session_id, call_id=record.id, tool_use_id=record.tool_use_id, name=record.name,
            input=record.input, risk=record.risk, reason=str(record.approval.meta.get("reason", "")),
            provenance=[p.to_dict() for p in record.provenance], meta=record.approval.meta,
            expires_at=record.approval.expires_at,
        ))

    def reoffer(self, record: ToolCallRecord) -> None:
        """A reopened session found `record` waiting: offer it again (once)."""
        if record.id not in self._waiting:
            self.register(record, None)
            self.announce(record)

    def resume(self, records: Sequence[ToolCallRecord]) -> Batch:
        """Re-offered calls wait as one batch again: a denial of one skips the others, as in a live batch."""
        batch = Batch()
        for record in records:
            if record.id not in self._waiting:
                self.register(record, batch)
            self._waiting[record.id].batch = batch
            batch.waiting.add(record.id)
        return batch

    async def wait(self, record: ToolCallRecord, abort: asyncio.Event, batch: Batch) -> ApprovalDecision | None:
        """The answer for `record`, or None when it expired or the run was aborted first."""
        waiting = self._waiting[record.id]
        timeout = None
        if record.approval.expires_at is not None:
            timeout = max(0.0, record.approval.expires_at - time.time())
        abort_wait = asyncio.ensure_future(abort.wait())
        try:
            done, _ = await asyncio.wait({waiting.future, abort_wait}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            abort_wait.cancel()
            self._waiting.pop(record.id, None)
            batch.waiting.discard(record.id)
        if waiting.future not in done:
            waiting.future.cancel()
            return None
        return waiting.future.result()

    def skip_waiting(self, batch: Batch) -> None:
        """After a denial, the calls of the batch still waiting are denied too, without asking."""
        for other_id in list(batch.waiting):
            other = self._waiting.get(other_id)
            if other and not other.future.done():
                other.future.set_result(Deny(note=SKIPPED_AFTER_DENIAL, by="executor"))

    @staticmethod
    def record_answer(record: ToolCallRecord, decision: ApprovalDecision) -> Provenance:
        """Write the answer into the record's approval and provenance; returns the provenance."""
        t_decided = time.time()
        ap = record.approval
        ap.decision = decision.kind
        ap.decided_by, ap.decided_at, ap.note = decision.by, t_decided, decision.note
        scope = decision.scope if isinstance(decision, Allow) else ApprovalScope.ONCE
        prov = Provenance("user", decision.by, source=scope, decision=ap.decision,
                          elapsed_ms=(t_decided - (record.updated_at or t_decided)) * 1000)
        record.provenance.append(prov)
        return prov

    @staticmethod
    def rule_for(record: ToolCallRecord, decision: Allow) -> Rule | None:
        """For SESSION and ALWAYS: the allow rule to add (the given one, or the one the policy suggests
        for the call; suggesting parses the command, so the executor calls this off the loop)."""
        if decision.scope not in (ApprovalScope.SESSION, ApprovalScope.ALWAYS):
            return None
        if decision.rule:
            return Rule.parse(decision.rule, Action.ALLOW, "session")
        return suggest_rule(record.name, record.input)

    def remember(self, rule: Rule, record: ToolCallRecord, scope: ApprovalScope) -> None:
        """Add `rule` for the session, or for the project (written to its rules file) for ALWAYS."""
        if scope is ApprovalScope.SESSION:
            self.policy.add_rule(Rule(Action.ALLOW, rule.target, rule.pattern, "session"), session_id=record.session_id)
        elif scope is ApprovalScope.ALWAYS:
            self.policy.add_rule(Rule(Action.ALLOW, rule.target, rule.pattern, "project"))
            if self.rule_writer is not None:
                self.rule_writer(rule)
