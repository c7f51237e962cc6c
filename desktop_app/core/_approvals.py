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
from ._events import PermissionRequired, QuestionAnswered, QuestionAsked
from ._reasons import SKIPPED_AFTER_DENIAL
from ._record import Provenance, ToolCallRecord
from .policy import Action, PermissionMode, PermissionPolicy, Rule, suggest_rule


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


SKIPPER = "executor"  # who "denies" a call that waits when another of its batch is denied: it is skipped


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
    denied_tool: str = ""  # the tool of the call the person denied, and who: the skipped calls name them
    denied_by: str = ""
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
        self._watchers: dict[str, list[Any]] = {}

    def watch(self, session_id: str, fn: Any) -> Any:
        """Call `fn(session_id)` when a call of the session starts or stops waiting; returns an unwatch."""
        self._watchers.setdefault(session_id, []).append(fn)
        return lambda: self._watchers.get(session_id, []).remove(fn)

    def pending_for(self, session_id: str) -> list[ToolCallRecord]:
        return [r for r in self.pending() if r.session_id == session_id]

    def _notify(self, session_id: str) -> None:
        for fn in list(self._watchers.get(session_id, ())):
            fn(session_id)

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
        self._notify(record.session_id)

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
            self._notify(record.session_id)
        if waiting.future not in done:
            waiting.future.cancel()
            return None
        return waiting.future.result()

    def skip_waiting(self, batch: Batch) -> None:
        """After a denial, the calls of the batch still waiting are skipped, without asking."""
        for other_id in list(batch.waiting):
            other = self._waiting.get(other_id)
            if other and not other.future.done():
                other.future.set_result(Deny(note=SKIPPED_AFTER_DENIAL, by=SKIPPER))

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


# -- questions and plans: the model asks the person (ask_user) or offers a plan (exit_plan_mode) -------------
NO_PERSON = "no person will answer: the session runs without one (mode strict, or the CLI's --on-ask deny)"
QUESTION_EXPIRED = "nobody answered in time"


@dataclass(frozen=True, slots=True)
class Answer:
    """The person's answer: `text` (for a question: what they typed or the choice they picked); for a plan,
    `approved` and the `mode` to switch to, or a `note` sent back when it is rejected. `answered` is False
    when nobody will answer (`note` says why)."""

    text: str = ""
    approved: bool = False
    mode: str = ""
    note: str = ""
    by: str = "user"
    answered: bool = True


@dataclass(slots=True)
class Question:
    """A question (kind "question", optional choices) or a plan to review (kind "plan") that waits."""

    id: str
    session_id: str
    call_id: str
    kind: str
    text: str
    choices: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    asked_at: float = field(default_factory=time.time)
    meta: dict[str, Any] = field(default_factory=dict)  # a sub-agent's labels, set by the desk


Watcher = Any  # Callable[[str], None]: called with a session id when what it waits for changes


class PendingQuestions:
    """The questions and plans that wait for the person, by id; answered from the inbox or the CLI.

    `no_person` (strict mode, `--on-ask deny`, a session nobody watches) answers each at once with
    `answered=False`, so the model is told no answer will come. Approving a plan switches the session's
    mode in the policy: the person picks the mode, the model never does."""

    PLAN_MODES: ClassVar[tuple[str, ...]] = ("ask", "accept-edits", "auto", "read-only", "strict")

    def __init__(self, bus: EventBus, policy: PermissionPolicy, *, timeout_s: float | None = None) -> None:
        self.bus = bus
        self.policy = policy
        self.timeout_s = timeout_s
        self.no_person = False
        self.on_ask: Any = None  # async (Question) -> Answer | None: a front end that answers itself (the CLI)
        self._waiting: dict[str, tuple[Question, asyncio.Future[Answer]]] = {}
        self._watchers: dict[str, list[Watcher]] = {}
        self._count = 0

    def watch(self, session_id: str, fn: Watcher) -> Any:
        """Call `fn(session_id)` when a question of the session starts or stops waiting; returns an unwatch."""
        self._watchers.setdefault(session_id, []).append(fn)
        return lambda: self._watchers.get(session_id, []).remove(fn)

    def pending(self, session_id: str | None = None) -> list[Question]:
        return [q for q, f in self._waiting.values() if not f.done() and session_id in (None, q.session_id)]

    def answer(self, question_id: str, answer: Answer) -> None:
        """Answer a waiting question or plan; ApprovalNotPending when it does not wait."""
        entry = self._waiting.get(question_id)
        if entry is None or entry[1].done():
            raise ApprovalNotPending(f"no question {question_id} is waiting for an answer")
        question = entry[0]
        if question.kind == "plan" and answer.approved and answer.mode not in question.modes:
            raise ApprovalNotPending(f"{answer.mode!r} is not one of the modes offered: {', '.join(question.modes)}")
        entry[1].set_result(answer)

    async def ask(self, session_id: str, call_id: str, kind: str, text: str, *, choices: Sequence[str] = (),
                  abort: asyncio.Event | None = None, meta: dict[str, Any] | None = None) -> Answer:
        """Offer a question or a plan and wait for the answer (or for nobody: see `no_person`). `meta`: the
        labels of a sub-agent's run; a sub-agent never offers a plan (only its parent leaves plan mode)."""
        meta = dict(meta or {})
        if kind == "plan" and meta.get("subagent"):
            raise ApprovalNotPending("a sub-agent cannot offer a plan: only its parent session leaves plan mode")
        self._count += 1
        modes = list(self.PLAN_MODES) if kind == "plan" else []
        q = Question(f"q{self._count}_{call_id}", session_id, call_id, kind, text, list(choices), modes, meta=meta)
        nobody = self.no_person or self.policy.mode_for(session_id) is PermissionMode.STRICT
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        if not nobody:  # waiting before it is announced: an answer that comes at once finds it
            self._waiting[q.id] = (q, fut)
        self.bus.publish(QuestionAsked(session_id=session_id, question_id=q.id, call_id=call_id, kind=kind,
                                       text=text, choices=q.choices, modes=modes, meta=meta))
        if nobody:
            return self._answered(q, Answer(answered=False, note=NO_PERSON, by="desk"))
        self._notify(session_id)
        try:
            answer = await self._wait(q, fut, abort)
        finally:
            self._waiting.pop(q.id, None)
            self._notify(session_id)
        return self._answered(q, answer)

    async def _wait(self, q: Question, fut: asyncio.Future[Answer], abort: asyncio.Event | None) -> Answer:
        waits: set[asyncio.Future[Any]] = {fut}
        if self.on_ask is not None:
            waits.add(asyncio.ensure_future(self.on_ask(q)))
        if abort is not None:
            waits.add(asyncio.ensure_future(abort.wait()))
        try:
            done, _ = await asyncio.wait(waits, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits - {fut}:
                w.cancel()
        if fut in done:
            return fut.result()
        front = next((d for d in done if d is not fut and not d.cancelled() and d.exception() is None
                      and isinstance(d.result(), Answer)), None)
        if front is not None:
            return front.result()
        if abort is not None and abort.is_set():
            return Answer(answered=False, note="the run was stopped before the person answered", by="user")
        return Answer(answered=False, note=QUESTION_EXPIRED if done == set() else NO_PERSON, by="desk")

    def _answered(self, q: Question, answer: Answer) -> Answer:
        if q.kind == "plan" and answer.answered and answer.approved:
            self.policy.set_session_mode(q.session_id, answer.mode)
        self.bus.publish(QuestionAnswered(
            session_id=q.session_id, question_id=q.id, call_id=q.call_id, kind=q.kind, answered=answer.answered,
            answer=answer.text if q.kind == "question" else ("approve" if answer.approved else "reject"),
            mode=answer.mode if answer.approved else "", note=answer.note, by=answer.by))
        return answer

    def _notify(self, session_id: str) -> None:
        for fn in list(self._watchers.get(session_id, ())):
            fn(session_id)
