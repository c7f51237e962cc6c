"""Rewinding a conversation: a new session (a branch) that starts from the messages before one turn of another;
the original stays in the store as it was. The branch's session names its parent and the point it left it
(in its `meta`, a row the chain binds), and its first record, a rewind, says the same in the chain."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ._bus import EventBus
from ._compaction import is_summary
from ._errors import AgentDeskError
from ._messages import StoredMessage, ToolCall
from ._project import SessionInfo
from ._record import Outcome, ToolCallRecord, ToolCallState, new_id
from ._recorder import RecordWriter
from ._store import RecordStore
from ._tool import ToolResult

BRANCH_OF = "branch_of"  # in a branch's meta: the session it was rewound from
BRANCH_BEFORE_MESSAGE = "branched_before_message"  # the id of the parent's message the branch stops before
BRANCH_BEFORE_CALL = "branched_before_call"  # the call the rewind was asked from ("" from a turn)
BRANCH_TOOL = "rewind_conversation"  # the name of its record in the chain


def starts_a_turn(msg: StoredMessage) -> bool:
    """A person's prompt (a user message with text or images, not a compaction's summary) starts a turn: the
    one test the conversation view numbers turns by and a rewind finds them by."""
    return msg.role == "user" and not is_summary(msg) and any(
        (b.get("type") == "text" and b.get("text")) or b.get("type") == "image" for b in msg.content)


@dataclass(frozen=True, slots=True)
class BranchPoint:
    """Where a conversation is rewound to: before `messages[index]`, the prompt that began the turn."""

    session: SessionInfo
    messages: list[StoredMessage]
    index: int
    call_id: str = ""

    @property
    def prompt(self) -> str:
        """The text of the turn's prompt (the person may want to ask it again, or otherwise)."""
        return "\n".join(b.get("text", "") for b in self.messages[self.index].content if b.get("type") == "text")

    def lines(self) -> list[str]:
        kept = self.index
        return [f"rewind the conversation: a new session from the {kept} message(s) before the turn "
                f"“{_short(self.prompt)}” (session {self.session.id} stays as it is)"]


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def point_before_call(session: SessionInfo, messages: list[StoredMessage], record: ToolCallRecord) -> BranchPoint:
    """The turn that holds `record`'s tool_use (AgentDeskError when no message of the session holds it)."""
    use = record.tool_use_id or record.id
    at = next((i for i, m in enumerate(messages) if m.role == "assistant"
               and any(b.get("type") == "tool_use" and b.get("id") == use for b in m.content)), None)
    if at is None:
        raise AgentDeskError(f"No message of session {session.id} asked for call {record.id}: "
                             "its conversation cannot be rewound to it.", hint="Rewind the files only.")
    start = next((i for i in range(at, -1, -1) if starts_a_turn(messages[i])), None)
    if start is None:
        raise AgentDeskError(f"Call {record.id} came before any prompt of session {session.id}.",
                             hint="Rewind the files only.")
    return BranchPoint(session, messages, start, record.id)


def point_before_turn(session: SessionInfo, messages: list[StoredMessage], turn: int) -> BranchPoint:
    """Before the `turn`-th prompt of the session (0 is the first)."""
    starts = [i for i, m in enumerate(messages) if starts_a_turn(m)]
    if not 0 <= turn < len(starts):
        raise AgentDeskError(f"Session {session.id} has no turn {turn + 1} (it has {len(starts)}).")
    return BranchPoint(session, messages, starts[turn])


def first_call_from(point: BranchPoint, records: list[ToolCallRecord]) -> str | None:
    """The first call asked from the turn on (the files before it are the files before the turn), if any."""
    later = [b.get("id") for m in point.messages[point.index:] if m.role == "assistant"
             for b in m.content if b.get("type") == "tool_use"]
    by_use = {r.tool_use_id or r.id: r.id for r in sorted(records, key=lambda r: r.created_at, reverse=True)}
    return next((by_use[u] for u in later if u in by_use), None)


async def branch_session(store: RecordStore, bus: EventBus, point: BranchPoint, *, actor: str,
                         ) -> tuple[SessionInfo, ToolCallRecord]:
    """Make the branch: its session (naming its parent), copies of the messages before the turn, and its first
    record (the rewind of the conversation: who asked, from which session, before which message)."""
    parent, cut = point.session, point.messages[point.index]
    title = (parent.title or "Session")[:50] + " (rewound)"
    branch = SessionInfo(id=new_id("ses_"), project_id=parent.project_id, title=title, model=parent.model,
                         meta={BRANCH_OF: parent.id, BRANCH_BEFORE_MESSAGE: cut.id, BRANCH_BEFORE_CALL: point.call_id})
    await store.save_session(branch)
    for m in point.messages[: point.index]:
        await store.append_message(StoredMessage(branch.id, m.role, copy.deepcopy(m.content), created_at=m.created_at))
    facts = {"branch_of": parent.id, "before_message": cut.id, "before_call": point.call_id,
             "messages_kept": point.index}
    record = await _record(store, bus, branch, facts, actor)
    return branch, record


async def _record(store: RecordStore, bus: EventBus, branch: SessionInfo, facts: dict[str, Any],
                  actor: str) -> ToolCallRecord:
    writer = RecordWriter(store, bus, lambda r: f"rewind the conversation of {facts['branch_of']}")
    record = ToolCallRecord(name=BRANCH_TOOL, input=facts, session_id=branch.id, project_id=branch.project_id)
    writer.create(record, ToolCall("", BRANCH_TOOL, facts))
    await writer.move(record, ToolCallState.APPROVED, actor=actor, note="the person asked for the rewind")
    await writer.move(record, ToolCallState.EXECUTING, actor="desk")
    summary = f"a new session from {facts['messages_kept']} message(s) of {facts['branch_of']}"
    record.result = ToolResult.text(summary).to_dict()
    await writer.move(record, ToolCallState.COMPLETED, actor="desk", note=summary, outcome=Outcome.OK)
    writer.publish_end(record)
    return record
