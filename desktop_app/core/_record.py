"""The tool-call record: an eight-state machine whose every transition leaves an audit entry."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ._errors import IllegalTransition


class ToolCallState(StrEnum):
    PENDING = "PENDING"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    APPROVED = "APPROVED"
    EXECUTING = "EXECUTING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    DENIED = "DENIED"
    SEALED = "SEALED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {ToolCallState.COMPLETED, ToolCallState.FAILED, ToolCallState.DENIED, ToolCallState.SEALED}
)

# The only edges there are. SEALED is reached by a reopened session, never by a live run.
TRANSITIONS: dict[ToolCallState, frozenset[ToolCallState]] = {
    ToolCallState.PENDING: frozenset({
        ToolCallState.APPROVAL_REQUIRED, ToolCallState.APPROVED, ToolCallState.EXECUTING,
        ToolCallState.FAILED, ToolCallState.DENIED, ToolCallState.SEALED,
    }),
    ToolCallState.APPROVAL_REQUIRED: frozenset(
        {ToolCallState.APPROVED, ToolCallState.DENIED, ToolCallState.FAILED}
    ),
    # APPROVED -> DENIED: allowed, then skipped because the person denied another call of the batch meanwhile
    ToolCallState.APPROVED: frozenset({
        ToolCallState.EXECUTING, ToolCallState.FAILED, ToolCallState.DENIED, ToolCallState.SEALED,
    }),
    ToolCallState.EXECUTING: frozenset({ToolCallState.COMPLETED, ToolCallState.FAILED, ToolCallState.SEALED}),
    ToolCallState.COMPLETED: frozenset(),
    ToolCallState.FAILED: frozenset(),
    ToolCallState.DENIED: frozenset(),
    ToolCallState.SEALED: frozenset(),
}


class Outcome(StrEnum):
    """Why a terminal record ended where it did."""

    OK = "ok"
    # FAILED
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    # DENIED
    POLICY = "policy"
    HOOK = "hook"
    USER = "user"
    EXPIRED = "expired"
    SKIPPED = "skipped"  # never offered nor run: the person denied an earlier call of its batch
    # SEALED
    SEALED = "sealed"


OUTCOMES_BY_STATE: dict[ToolCallState, frozenset[Outcome]] = {
    ToolCallState.COMPLETED: frozenset({Outcome.OK}),
    ToolCallState.FAILED: frozenset({Outcome.ERROR, Outcome.TIMEOUT, Outcome.CANCELLED, Outcome.INTERRUPTED}),
    ToolCallState.DENIED: frozenset({
        Outcome.POLICY, Outcome.HOOK, Outcome.USER, Outcome.EXPIRED, Outcome.SKIPPED,
    }),
    ToolCallState.SEALED: frozenset({Outcome.SEALED}),
}


class Risk(StrEnum):
    """How much harm a call could do; a call's risk is the highest that its tool, the policy and the
    hooks name."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @classmethod
    def of(cls, value: str | None) -> Risk:
        """`value` as a Risk; an unknown or missing one counts as LOW."""
        if isinstance(value, Risk):
            return value
        try:
            return cls(value)
        except ValueError:
            return cls.LOW


_RISK_ORDER = (Risk.LOW, Risk.MEDIUM, Risk.HIGH)


def highest_risk(*risks: str | None) -> Risk:
    return max((Risk.of(r) for r in risks), key=_RISK_ORDER.index)


def now() -> float:
    return time.time()


def new_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex}"


@dataclass(slots=True)
class AuditEntry:
    """One transition of one record: where it went, when, who moved it, and why."""

    record_id: str
    state: ToolCallState
    at: float
    actor: str
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    # Filled by the store when the entry joins the hash chain.
    seq: int | None = None
    hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id,
            "state": self.state.value,
            "at": self.at,
            "actor": self.actor,
            "note": self.note,
            "data": self.data,
        }


@dataclass(slots=True)
class Provenance:
    """What made a permission decision: a rule (text + source), the mode, a hook, or a person."""

    kind: str  # "rule" | "mode" | "hook" | "user" | "expiry" | "session-rule"
    detail: str  # rule text, mode name, hook name, or person
    source: str = ""  # where a rule came from: project file, user settings, session
    decision: str = ""  # allow | ask | deny
    elapsed_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "source": self.source,
            "decision": self.decision,
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


@dataclass(slots=True)
class Approval:
    required: bool = False
    decision: str | None = None  # allow | deny
    decided_by: str | None = None
    decided_at: float | None = None
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None
    edited_input: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "required": self.required,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "note": self.note,
            "meta": self.meta,
            "expires_at": self.expires_at,
            "edited_input": self.edited_input,
        }


@dataclass(slots=True)
class ToolCallRecord:
    """The life of one tool_use block, from PENDING to a terminal state.

    `id` is the desk's own key, unique for ever; `tool_use_id` is the model's id for the block, which
    the model may repeat, so it only pairs the tool_result with its tool_use and never looks a record up.
    """

    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: new_id("call_"))
    tool_use_id: str = ""
    session_id: str = ""
    project_id: str = ""
    batch_index: int = 0
    state: ToolCallState = ToolCallState.PENDING
    outcome: Outcome | None = None
    approval: Approval = field(default_factory=Approval)
    provenance: list[Provenance] = field(default_factory=list)
    result: dict[str, Any] | None = None  # ToolResult.to_dict()
    error: str | None = None
    is_error: bool = False
    sandbox: dict[str, Any] = field(default_factory=dict)  # Sandbox.describe() at run time
    read_only: bool = False
    risk: Risk = Risk.LOW
    started_at: float | None = None
    completed_at: float | None = None
    duration_ms: float | None = None
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)
    trail: list[AuditEntry] = field(default_factory=list)

    def transition(
        self,
        to: ToolCallState,
        *,
        actor: str,
        note: str = "",
        outcome: Outcome | None = None,
        data: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> AuditEntry:
        """Move to `to`, or raise IllegalTransition; returns the audit entry to persist."""
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"tool call {self.id}: {self.state.value} -> {to.value} is not allowed")
        if to.terminal:
            if outcome is None:
                outcome = Outcome.OK if to is ToolCallState.COMPLETED else None
            if outcome is None or outcome not in OUTCOMES_BY_STATE[to]:
                raise IllegalTransition(
                    f"tool call {self.id}: {to.value} needs an outcome in "
                    f"{sorted(o.value for o in OUTCOMES_BY_STATE[to])}, got {outcome}"
                )
        elif outcome is not None:
            raise IllegalTransition(f"tool call {self.id}: {to.value} is not terminal and takes no outcome")
        t = now() if at is None else at
        self.state = to
        self.updated_at = t
        if to is ToolCallState.EXECUTING:
            self.started_at = t
        if to.terminal:
            self.outcome = outcome
            self.completed_at = t
            if self.started_at is not None:
                self.duration_ms = (t - self.started_at) * 1000.0
        entry = AuditEntry(record_id=self.id, state=to, at=t, actor=actor, note=note, data=data or {})
        self.trail.append(entry)
        return entry

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    @property
    def model_input(self) -> dict[str, Any] | None:
        """The model's own input, when a person edited it before allowing the call (the trail keeps both: the
        entry of the edit holds `original_input` and `edited_input`); None when nobody edited it."""
        for entry in self.trail:
            if "edited_input" in entry.data and "original_input" in entry.data:
                original = entry.data["original_input"]
                return original if isinstance(original, dict) else None
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool_use_id": self.tool_use_id,
            "name": self.name,
            "input": self.input,
            "session_id": self.session_id,
            "project_id": self.project_id,
            "batch_index": self.batch_index,
            "state": self.state.value,
            "outcome": self.outcome.value if self.outcome else None,
            "approval": self.approval.to_dict(),
            "provenance": [p.to_dict() for p in self.provenance],
            "result": self.result,
            "error": self.error,
            "is_error": self.is_error,
            "sandbox": self.sandbox,
            "read_only": self.read_only,
            "risk": str(self.risk),
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "duration_ms": self.duration_ms,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], trail: list[AuditEntry] | None = None) -> ToolCallRecord:
        ap = d.get("approval") or {}
        return cls(
            id=d["id"],
            tool_use_id=d.get("tool_use_id") or "",
            name=d["name"],
            input=d.get("input") or {},
            session_id=d.get("session_id") or "",
            project_id=d.get("project_id") or "",
            batch_index=d.get("batch_index") or 0,
            state=ToolCallState(d["state"]),
            outcome=Outcome(d["outcome"]) if d.get("outcome") else None,
            approval=Approval(**ap) if ap else Approval(),
            provenance=[Provenance(**p) for p in d.get("provenance") or []],
            result=d.get("result"),
            error=d.get("error"),
            is_error=bool(d.get("is_error")),
            sandbox=d.get("sandbox") or {},
            read_only=bool(d.get("read_only")),
            risk=Risk.of(d.get("risk")),
            started_at=d.get("started_at"),
            completed_at=d.get("completed_at"),
            duration_ms=d.get("duration_ms"),
            created_at=d.get("created_at") or now(),
            updated_at=d.get("updated_at") or now(),
            trail=trail or [],
        )
