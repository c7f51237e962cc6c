"""PendingApproval: one call waiting for a person, built from a live event or a stored record."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ...core import PermissionRequired, ToolCallRecord, label_from_name, visible
from .._call_labels import call_label, live_tool
from .._mcp import McpCallName, where_label


@dataclass(slots=True)
class PendingApproval:
    """One call waiting for a person: what it is, how risky, and why it asks."""

    call_id: str
    session_id: str
    name: str
    input: dict[str, Any]
    risk: str = "low"
    reason: str = ""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None
    received_at: float = field(default_factory=time.time)
    project_id: str = ""
    session_title: str = ""
    preview: str | None = None  # diff text, filled lazily for fs_write / fs_edit
    mcp: McpCallName | None = None  # an MCP tool's server and own name (set by the inbox), None if built-in

    @classmethod
    def from_event(cls, ev: PermissionRequired) -> PendingApproval:
        return cls(
            call_id=ev.call_id, session_id=ev.session_id, name=ev.name, input=dict(ev.input or {}),
            risk=ev.risk or "low", reason=ev.reason, provenance=list(ev.provenance or []),
            meta=dict(ev.meta or {}), expires_at=ev.expires_at,
            preview=(ev.meta or {}).get("diff"),
        )

    @classmethod
    def from_record(cls, rec: ToolCallRecord) -> PendingApproval:
        meta = dict(rec.approval.meta or {})
        prov = [p.to_dict() for p in rec.provenance]
        reason = meta.get("reason") or (f"{prov[-1]['kind']}: {prov[-1]['detail']}" if prov else "")
        return cls(
            call_id=rec.id, session_id=rec.session_id, project_id=rec.project_id, name=rec.name,
            input=dict(rec.input), risk=rec.risk, reason=reason, provenance=prov, meta=meta,
            expires_at=rec.approval.expires_at, received_at=rec.updated_at, preview=meta.get("diff"),
        )

    @property
    def subagent(self) -> str:
        """The sub-agent that asks (its name, from the executor's labels), or "" for a session's own call."""
        name = self.meta.get("subagent")
        return visible(str(name)) if name else ""

    @property
    def title(self) -> str:
        """What the card calls the tool: its label; an MCP tool's with its server and where that runs; a
        sub-agent's call is marked with the sub-agent's name."""
        by = f"⤷ {self.subagent} · " if self.subagent else ""
        if self.mcp is None:
            return by + self.label
        where = f" · {where_label(self.mcp.where)}" if self.mcp.where else ""
        return by + visible(f"{self.label} — MCP server {self.mcp.server}{where}")

    @property
    def label(self) -> str:
        """The tool's human label ("Run command"; an MCP tool's title), as its card says it; an MCP tool the
        desk has no live server for is named by its own name's words (its server is named beside it)."""
        if self.mcp is not None and not live_tool(self.name):
            return visible(label_from_name(self.mcp.tool))
        return call_label(self.name)

    @property
    def why(self) -> str:
        """The reason the call asks, with where that came from (a rule, the mode, a hook)."""
        if self.reason:
            return self.reason
        for p in reversed(self.provenance):
            if p.get("decision") == "ask" or p is self.provenance[-1]:
                src = f" ({p['source']})" if p.get("source") else ""
                return f"{p.get('kind', '?')}: {p.get('detail', '')}{src}"
        return "permission mode asks"

    def remaining_s(self, now: float | None = None) -> float | None:
        if self.expires_at is None:
            return None
        return self.expires_at - (time.time() if now is None else now)
