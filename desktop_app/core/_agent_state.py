"""A session's agent state (READY, WORKING, PAUSED, STOPPED) and its status: live from an AgentSession, or
read back from the stored events by a process that does not run the session (`agent-desk sessions status`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ._events import AgentState, AgentStateChanged, Channel, Envelope, ErrorEvent, QuestionAnswered, QuestionAsked
from ._record import ToolCallRecord, ToolCallState


@dataclass(slots=True)
class AgentStatus:
    """What `AgentSession.status()` returns: the state (and why, and what a pause waits for), the steps of
    the current or last turn and of the session, the event cursor (the bus's seq: replay from it), the
    calls and questions that wait for the person, and the last error."""

    session_id: str
    state: AgentState = AgentState.READY
    reason: str = ""
    why: str = ""
    steps: int = 0
    total_steps: int = 0
    cursor: int = 0
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    pending_questions: list[dict[str, Any]] = field(default_factory=list)
    last_error: dict[str, Any] | None = None
    live: bool = True  # False: read back from the store, as last recorded

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = self.state.value
        return d


def approval_summary(record: ToolCallRecord) -> dict[str, Any]:
    return {"call_id": record.id, "name": record.name, "risk": str(record.risk),
            "reason": str(record.approval.meta.get("reason", ""))}


def error_summary(ev: ErrorEvent) -> dict[str, Any]:
    return {"message": ev.message, "phase": ev.phase, "severity": ev.severity, "source": ev.source}


STATUS_CHANNELS = (Channel.MONITOR, Channel.CONTROL)


def status_from_events(session_id: str, envelopes: Iterable[Envelope],
                       records: Iterable[ToolCallRecord]) -> AgentStatus:
    """The status as the store last recorded it: the last agent state, the questions asked and not
    answered, the calls left in APPROVAL_REQUIRED, the last error of phase model or system (or tool)."""
    status = AgentStatus(session_id=session_id, live=False)
    questions: dict[str, dict[str, Any]] = {}
    for env in envelopes:
        if env.session_id != session_id:
            continue
        status.cursor = max(status.cursor, env.seq)
        ev = env.event
        if isinstance(ev, AgentStateChanged):
            status.state, status.why, status.reason = AgentState(ev.state), ev.why, ev.reason
            status.steps, status.total_steps = ev.steps, ev.total_steps
        elif isinstance(ev, QuestionAsked):
            questions[ev.question_id] = {"question_id": ev.question_id, "kind": ev.kind, "text": ev.text,
                                         "choices": list(ev.choices), "call_id": ev.call_id}
        elif isinstance(ev, QuestionAnswered):
            questions.pop(ev.question_id, None)
        elif isinstance(ev, ErrorEvent) and not ev.retrying:
            status.last_error = error_summary(ev)
    records = list(records)
    # A question whose call is over (the process died and the call was sealed) waits for nobody.
    over = {r.id for r in records if r.terminal}
    status.pending_questions = [q for q in questions.values() if q.pop("call_id") not in over]
    status.pending_approvals = [approval_summary(r) for r in records
                                if r.state is ToolCallState.APPROVAL_REQUIRED]
    return status
