"""The one exception tree: each error carries a message a person can act on."""

from __future__ import annotations


class AgentDeskError(Exception):
    """Base of every error the desk raises on purpose; `str()` is the user-facing message."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        if hint:
            self.hint = hint

    def user_message(self) -> str:
        text = str(self)
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class IllegalTransition(AgentDeskError):
    """A tool-call record was asked to move along an edge the state machine does not have."""


class ToolNotFound(AgentDeskError):
    """The model asked for a tool the registry does not know."""


class ToolInputError(AgentDeskError):
    """The input failed the tool's schema or its semantic validation."""


class ConfigError(AgentDeskError):
    """Settings, rules or a project file could not be read."""


class StoreError(AgentDeskError):
    """The audit store could not durably write or read (locked, full, corrupt)."""


class SandboxError(AgentDeskError):
    """The sandbox is missing, unreachable, or refused an operation."""


class PathOutsideWorkspace(SandboxError):
    """A path resolved outside /workspace."""


class ApprovalNotPending(AgentDeskError):
    """An answer came for a call that is not waiting for approval (expired, already answered, or
    unknown): nothing happened, and a front end drops what it shows for that call."""


class ModelError(AgentDeskError):
    """The model endpoint failed (auth, bad request, overloaded after retries); `status_code` is the
    HTTP status when there was one."""

    def __init__(self, message: str, *, hint: str = "", status_code: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status_code = status_code
