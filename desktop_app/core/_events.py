"""Typed run events and their envelopes: what happens in a run, as the UI, the store and the CLI read it.

The bus that persists and fans them out is in `_bus.py`: the store protocol (`_store.py`) needs these types,
and the bus needs the store, so keeping them apart leaves no import cycle.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar


class Channel(StrEnum):
    PROGRESS = "progress"
    CONTROL = "control"
    MONITOR = "monitor"


class TurnEnd(StrEnum):
    """Why a turn ended (`Done.reason`, `TurnResult.reason`); the CLI maps each to an exit code."""

    END_TURN = "end_turn"
    INTERRUPTED = "interrupted"
    PAUSED = "paused"
    ERROR = "error"
    MAX_STEPS = "max_steps"


EVENT_TYPES: dict[str, type[Event]] = {}


@dataclass(slots=True)
class Event:
    """Base of every event; subclasses name their channel and wire type."""

    channel: ClassVar[Channel]
    type: ClassVar[str]
    session_id: str = ""

    def __init_subclass__(cls, **kw: Any) -> None:
        # No zero-arg super(): slots=True rebuilds the class, so its __class__ cell would be stale.
        super(Event, cls).__init_subclass__(**kw)
        # A scoped class (AgentStateChanged) shares its wire type with the first class of that type.
        # (slots=True makes the class twice: the second, kept, replaces the first.)
        known = EVENT_TYPES.get(cls.type) if "type" in cls.__dict__ else None
        if "type" in cls.__dict__ and (known is None or known.__qualname__ == cls.__qualname__):
            EVENT_TYPES[cls.type] = cls

    def payload(self) -> dict[str, Any]:
        # Shallow on purpose: an event is not changed after it is published, and a deep copy per event
        # is the largest cost on the dispatch path.
        return {name: getattr(self, name) for name in _field_names(type(self))}


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


# progress ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class TextChunk(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "text_chunk"
    text: str = ""
    message_id: str = ""


@dataclass(slots=True)
class ThinkingChunk(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "thinking_chunk"
    text: str = ""
    message_id: str = ""


@dataclass(slots=True)
class ToolStart(Event):
    """A tool_use block appeared. While its input streams in (`partial`), `partial_json` is the head of the
    JSON added since the previous event (at most PARTIAL_JSON_MAX characters of it: the whole input is the
    call's, and an event that carried megabytes would be redacted and stored on the loop) and `input` a
    preview of the object so far.

    A partial event comes before the call has a record: its `call_id` is empty and only `tool_use_id` (the
    model's id) names it. The record's own event carries both, so a view can hand the streamed card over
    to the desk's id."""

    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:start"
    call_id: str = ""
    tool_use_id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    partial_json: str = ""
    partial: bool = False


@dataclass(slots=True)
class ToolUpdate(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:update"
    call_id: str = ""
    stream: str = "stdout"
    text: str = ""


@dataclass(slots=True)
class ToolEnd(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:end"
    call_id: str = ""
    name: str = ""
    state: str = ""
    outcome: str | None = None
    is_error: bool = False
    duration_ms: float | None = None
    summary: str = ""
    exit_code: int | None = None  # a command's, so a view can colour its end at once (exit 1 is no success)
    reason: str = ""  # why a failed, denied or sealed call did not succeed (its record's error); "" otherwise


@dataclass(slots=True)
class ToolError(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:error"
    call_id: str = ""
    name: str = ""
    error: str = ""


@dataclass(slots=True)
class Done(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "done"
    reason: TurnEnd = TurnEnd.END_TURN
    message: str = ""


# control ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class PermissionRequired(Event):
    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "permission_required"
    call_id: str = ""
    tool_use_id: str = ""  # the model's id, shown to a person; answers name `call_id`
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    risk: str = "low"
    reason: str = ""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None


@dataclass(slots=True)
class PermissionDecided(Event):
    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "permission_decided"
    call_id: str = ""
    decision: str = ""  # allow | deny
    decided_by: str = ""
    note: str = ""
    edited: bool = False


# monitor ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class ToolExecuted(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "tool_executed"
    call_id: str = ""
    name: str = ""
    state: str = ""
    outcome: str | None = None
    duration_ms: float | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)
    # Who or what let it run: {"by": "policy"|"rule"|"mode"|"user"|..., "detail", "decision", "scope"}.
    approval: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ErrorEvent(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "error"
    source: str = ""
    message: str = ""
    retrying: bool = False
    attempt: int = 0
    phase: str = "system"  # model | tool | system
    severity: str = "error"  # info | warn | error


@dataclass(slots=True)
class StateChanged(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "state_changed"
    call_id: str = ""
    name: str = ""
    state: str = ""
    previous: str = ""
    actor: str = ""
    note: str = ""


@dataclass(slots=True)
class TokenUsage(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "token_usage"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(slots=True)
class SandboxSurvivors(Event):
    """The sandbox's processes at the end of a session: `killed` were still running (outside any call
    that was running) and were killed; `alive` outlived the kill. Each is {pid, command, started_by}."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "sandbox:survivors"
    killed: list[dict[str, Any]] = field(default_factory=list)
    alive: list[dict[str, Any]] = field(default_factory=list)
    keep_running: bool = False


@dataclass(slots=True)
class Compacted(Event):
    """The session's older turns were summarised (near the context limit, or by hand): the history sent
    starts with the summary from now on; the store keeps every original message."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "compacted"
    summarised: int = 0  # messages the summary stands for
    kept: int = 0  # messages kept whole after it
    tokens_before: int = 0
    manual: bool = False
    summary: str = ""


@dataclass(slots=True)
class ToolCustom(Event):
    """A running tool's own event (`ctx.emit(name, data)`): shown under its call in the timeline."""

    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:custom"
    call_id: str = ""
    tool: str = ""
    name: str = ""
    data: dict[str, Any] = field(default_factory=dict)


# the agent, the person and the workspace (issue 16) ------------------------------------------------
class AgentState(StrEnum):
    """Where a session's agent is: idle, taking steps, waiting for a person, or stopped."""

    READY = "READY"
    WORKING = "WORKING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class PauseReason(StrEnum):
    """What a PAUSED agent waits for."""

    APPROVAL = "approval"
    QUESTION = "question"
    PLAN = "plan"
    BREAKPOINT = "breakpoint"  # a call waits at a breakpoint the person set


@dataclass(slots=True)
class AgentStateChanged(StateChanged):
    """The agent of a session moved from `previous` to `state`, and `why`. Its wire type is the per-call
    event's, "state_changed", told apart by `scope` "agent" (`Envelope.event` builds this class for it). A
    subclass, so a reader of every state_changed finds the same fields (its `call_id` and `name` are empty,
    `actor` is "agent", `note` repeats `why`); the bridge gives it a signal of its own."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "state_changed"
    actor: str = "agent"
    scope: str = "agent"
    why: str = ""
    reason: str = ""  # a PauseReason when state is PAUSED
    steps: int = 0  # model steps of the current (or last) turn
    total_steps: int = 0  # of the session, since it was opened


@dataclass(slots=True)
class QuestionAsked(Event):
    """The model asks the person (`kind` "question", with optional `choices`) or offers a plan to review
    (`kind` "plan", `text` in Markdown). Answered by `PendingQuestions.answer(question_id, ...)`."""

    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "question_asked"
    question_id: str = ""
    call_id: str = ""
    kind: str = "question"
    text: str = ""
    choices: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)  # for a plan: the modes the person may switch to
    meta: dict[str, Any] = field(default_factory=dict)  # a sub-agent's labels (core.asked_by names it)


@dataclass(slots=True)
class QuestionAnswered(Event):
    """A question or plan was answered (`answer`; for a plan "approve" or "reject", `mode`), or nobody
    will answer it (`answered` False, `note` says why)."""

    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "question_answered"
    question_id: str = ""
    call_id: str = ""
    kind: str = "question"
    answered: bool = True
    answer: str = ""
    mode: str = ""
    note: str = ""
    by: str = "user"


@dataclass(slots=True)
class TodoChanged(Event):
    """The session's todo list changed: the whole new list, and the counts per status."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "todo_changed"
    call_id: str = ""
    todos: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class FileChanged(Event):
    """Files of the project changed on the host, by no tool call (the person's editor, a background
    process): workspace-relative `paths`, and what happened to each (`kinds`: created, modified, deleted,
    moved)."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "file_changed"
    project_id: str = ""
    paths: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


SCOPED_TYPES: dict[tuple[str, str], type[Event]] = {("state_changed", "agent"): AgentStateChanged}


# lifecycle (issue 14): what a person must be told about a session, kept with it ----------------------------
@dataclass(slots=True)
class SessionNotice(Event):
    """A line the conversation shows and shows again after a restart (e.g. the calls that a process which
    ended took with it). `level` is info | warning | error."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "session:notice"
    text: str = ""
    level: str = "info"
# sub-agents ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class SubagentStarted(Event):
    """A session's call (`call_id`, a task_run) started a child session; its calls carry that session's id."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "subagent:started"
    call_id: str = ""
    child_session_id: str = ""
    name: str = ""
    template: str = ""
    depth: int = 1


@dataclass(slots=True)
class SubagentFinished(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "subagent:finished"
    call_id: str = ""
    child_session_id: str = ""
    name: str = ""
    reason: str = ""
    steps: int = 0


RunEvent = (
    TextChunk
    | ThinkingChunk
    | ToolStart
    | ToolUpdate
    | ToolEnd
    | ToolError
    | Done
    | PermissionRequired
    | PermissionDecided
    | ToolExecuted
    | ErrorEvent
    | StateChanged
    | TokenUsage
    | SandboxSurvivors
    | Compacted
    | ToolCustom
    | AgentStateChanged
    | QuestionAsked
    | QuestionAnswered
    | TodoChanged
    | FileChanged
    | SessionNotice
    | SubagentStarted
    | SubagentFinished
)
"""Every event a run can publish: match on the class, never on a payload's string keys."""


@dataclass(slots=True, frozen=True)
class Envelope:
    """What travels and is persisted: a bookmark (`seq`), a channel, a type, a time and a payload."""

    seq: int
    channel: Channel
    type: str
    time: float
    payload: dict[str, Any]
    session_id: str = ""

    @property
    def event(self) -> Event:
        cls = EVENT_TYPES[self.type]
        scope = self.payload.get("scope")
        if scope is not None:
            cls = SCOPED_TYPES.get((self.type, scope), cls)
        names = set(_field_names(cls))
        return cls(**{k: v for k, v in self.payload.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "channel": self.channel.value,
            "type": self.type,
            "time": self.time,
            "session_id": self.session_id,
            "payload": self.payload,
        }
