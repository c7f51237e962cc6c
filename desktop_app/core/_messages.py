"""The Messages-API shape in one room: tool calls in, tool results out, and stored history as the API wants it.

Kept apart from the executor so that the model seam (`_llm.py`) needs only this, not the executor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ._record import ToolCallRecord, now


@dataclass(slots=True)
class ToolCall:
    """One tool_use block as the model sent it."""

    id: str
    name: str
    input: dict[str, Any] | None
    raw_input: str = ""
    parse_error: str | None = None


@dataclass(slots=True)
class StoredMessage:
    """One Messages-API message as sent: role plus a list of content blocks."""

    session_id: str
    role: str  # user | assistant
    content: list[dict[str, Any]]
    id: int | None = None
    created_at: float = field(default_factory=now)


def tool_result_block(record: ToolCallRecord) -> dict[str, Any]:
    """The Messages-API tool_result for a terminal record."""
    result = record.result or {}
    content = result.get("content") or [
        {"type": "text", "text": json.dumps({"ok": False, "error": record.error or "no result"})}
    ]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": record.tool_use_id or record.id,
                             "content": content}
    if record.is_error:
        block["is_error"] = True
    return block


def sealed_result(call_id: str, reason: str, **facts: Any) -> dict[str, Any]:
    """The tool_result of a call that never reported one (`reason` says why): an error marked
    `_autoSealed` that warns of side effects. `facts` join the body (e.g. the state it was in)."""
    error = (
        f"This tool call never reported a result ({reason}). It may have had side effects "
        "(files written, processes started): check the workspace before you retry it."
    )
    body = {"ok": False, "error": error, "_autoSealed": True, **facts}
    return {"type": "tool_result", "tool_use_id": call_id, "is_error": True,
            "content": [{"type": "text", "text": json.dumps(body)}]}


def text_blocks(texts: list[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts if t]


def normalize(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """History as the API wants it: consecutive messages of one role merged, tool_results first."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.content if isinstance(m.content, list) else [{"type": "text", "text": str(m.content)}]
        if not content:
            continue
        if out and out[-1]["role"] == m.role:
            out[-1]["content"] = out[-1]["content"] + list(content)
        else:
            out.append({"role": m.role, "content": list(content)})
    for msg in out:
        if msg["role"] == "user":
            blocks = msg["content"]
            msg["content"] = [b for b in blocks if b.get("type") == "tool_result"] + [
                b for b in blocks if b.get("type") != "tool_result"
            ]
    return out
