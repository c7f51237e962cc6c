"""EventBridge: the one place where core events become Qt signals, delivered on the GUI thread."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import SIGNAL, QObject, Signal

from ..core import (
    AgentStateChanged,
    Done,
    Envelope,
    ErrorEvent,
    EventBus,
    FileChanged,
    McpServersChanged,
    PermissionDecided,
    PermissionRequired,
    QuestionAnswered,
    QuestionAsked,
    SandboxSurvivors,
    SessionNotice,
    StateChanged,
    SubagentStarted,
    TextChunk,
    ThinkingChunk,
    TodoChanged,
    TokenUsage,
    ToolCustom,
    ToolEnd,
    ToolError,
    ToolExecuted,
    ToolStart,
    ToolUpdate,
)


class EventBridge(QObject):
    """Subscribes to an EventBus and re-emits each event as a typed signal.

    Signals carry the event dataclass itself (plus the envelope's seq where it matters), so slots read
    the same types as the store and the CLI. Emitting from another thread is safe: the bridge lives on
    the GUI thread, so Qt queues the call there.
    """

    textChunk = Signal(str, str, str)  # session_id, message_id, text
    thinkingChunk = Signal(str, str, str)
    toolStarted = Signal(object)  # ToolStart
    toolUpdated = Signal(object)  # ToolUpdate
    toolEnded = Signal(object)  # ToolEnd
    toolErrored = Signal(object)  # ToolError
    turnDone = Signal(object)  # Done
    permissionRequired = Signal(object)  # PermissionRequired
    permissionDecided = Signal(object)  # PermissionDecided
    toolExecuted = Signal(object)  # ToolExecuted
    stateChanged = Signal(object)  # StateChanged
    tokenUsage = Signal(object)  # TokenUsage
    errorOccurred = Signal(object)  # ErrorEvent
    sandboxSurvivors = Signal(object)  # SandboxSurvivors
    mcpServersChanged = Signal(object)  # McpServersChanged
    sessionNotice = Signal(object)  # SessionNotice
    subagentStarted = Signal(object)  # SubagentStarted
    envelope = Signal(object)  # every Envelope, for views that want the raw stream
    toolCustom = Signal(object)  # ToolCustom: a running tool's own event (ctx.emit)
    # issue 16: the agent's state, the person's questions and plans, the todo list, the host's changes
    agentStateChanged = Signal(object)  # AgentStateChanged (wire type "state_changed", scope "agent")
    questionAsked = Signal(object)  # QuestionAsked
    questionAnswered = Signal(object)  # QuestionAnswered
    todoChanged = Signal(object)  # TodoChanged
    fileChanged = Signal(object)  # FileChanged

    def __init__(self, bus: EventBus | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._unsubscribe: Callable[[], None] | None = None
        self.last_seq = 0
        self._signals: dict[str, Callable[[object], None]] = {
            ToolStart.type: self.toolStarted.emit,
            ToolUpdate.type: self.toolUpdated.emit,
            ToolEnd.type: self.toolEnded.emit,
            ToolError.type: self.toolErrored.emit,
            Done.type: self.turnDone.emit,
            PermissionRequired.type: self.permissionRequired.emit,
            PermissionDecided.type: self.permissionDecided.emit,
            ToolExecuted.type: self.toolExecuted.emit,
            StateChanged.type: self.stateChanged.emit,
            TokenUsage.type: self.tokenUsage.emit,
            ErrorEvent.type: self.errorOccurred.emit,
            SandboxSurvivors.type: self.sandboxSurvivors.emit,
            McpServersChanged.type: self.mcpServersChanged.emit,
            ToolCustom.type: self.toolCustom.emit,
            QuestionAsked.type: self.questionAsked.emit,
            QuestionAnswered.type: self.questionAnswered.emit,
            TodoChanged.type: self.todoChanged.emit,
            FileChanged.type: self.fileChanged.emit,
            SessionNotice.type: self.sessionNotice.emit,
            SubagentStarted.type: self.subagentStarted.emit,
        }
        if bus is not None:
            self.attach(bus)

    def attach(self, bus: EventBus) -> None:
        self.detach()
        self._unsubscribe = bus.on("*", self.deliver)

    def detach(self) -> None:
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            except ValueError:
                pass
            self._unsubscribe = None

    def deliver(self, env: Envelope) -> None:
        self.last_seq = max(self.last_seq, env.seq)
        t = env.type
        # Text chunks are the hot path: skip building the dataclass.
        if t == TextChunk.type:
            p = env.payload
            self.textChunk.emit(env.session_id, p.get("message_id", ""), p.get("text", ""))
        elif t == ThinkingChunk.type:
            p = env.payload
            self.thinkingChunk.emit(env.session_id, p.get("message_id", ""), p.get("text", ""))
        else:
            emit = self._signals.get(t)
            if emit is not None:
                event = env.event
                # one wire type, two classes: the agent's state goes to its own signal
                (self.agentStateChanged.emit if isinstance(event, AgentStateChanged) else emit)(event)
        if self.receivers(SIGNAL("envelope(PyObject)")) > 0:
            self.envelope.emit(env)
