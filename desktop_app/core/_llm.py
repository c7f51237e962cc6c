"""The model seam: what the agent loop asks of an LLM (one streamed step in, the assistant message back).

"Model" in this project means the LLM; Qt item models are "Qt models" and database tables are "tables".
The Anthropic implementation is in `_anthropic.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ._events import Event
from ._messages import ToolCall

DEFAULT_MODEL = "claude-sonnet-4-6"

Emit = Callable[[Event], Any]


@dataclass(slots=True)
class ModelRequest:
    """One step's input. `messages` are the persisted history; the client adds cache marks on a copy."""

    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int | None = None


@dataclass(slots=True)
class ModelUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(slots=True)
class ModelReply:
    """The finished assistant message: content blocks ready to persist, and the tool calls in it."""

    message_id: str
    model: str
    content: list[dict[str, Any]]
    tool_uses: list[ToolCall]
    stop_reason: str | None
    usage: ModelUsage
    duration_ms: float = 0.0

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


@runtime_checkable
class ModelClient(Protocol):
    """What the loop needs from a model: stream one step, publishing events through `emit`."""

    model: str

    async def stream(self, request: ModelRequest, *, emit: Emit, session_id: str = "") -> ModelReply: ...

    async def close(self) -> None: ...
