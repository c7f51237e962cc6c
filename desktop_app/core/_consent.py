"""Consent: the person approved an agent-writable (or repository-shipped) project file as it is now. One
type and one status for every kind of subject: the rules file, the hooks file, each MCP server entry."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ConsentKind(StrEnum):
    """What a consent is about. A new kind is a member here and one entry in the runtime's kind registry."""

    RULES = "rules"  # .agent-desk/rules.toml
    HOOKS = "hooks"  # .agent-desk/hooks.toml
    MCP = "mcp"  # one server entry of .agent-desk/mcp.json that asks for a relaxation


class ConsentStatus(StrEnum):
    """A subject against what the person approved. Only NONE and APPROVED let the subject be used whole."""

    NONE = "none"  # no subject, nothing approved
    APPROVED = "approved"  # the subject is exactly what the person approved
    NEW = "new"  # never approved (e.g. shipped by a repository)
    CHANGED = "changed"  # edited since the approval
    DELETED = "deleted"  # approved once, now gone

    @classmethod
    def of(cls, current: str | None, approved: str | None) -> ConsentStatus:
        """The status from the subject's current digest and the approved one (None: absent)."""
        if current is None:
            return cls.NONE if approved is None else cls.DELETED
        if approved is None:
            return cls.NEW
        return cls.APPROVED if current == approved else cls.CHANGED


@dataclass(frozen=True, slots=True)
class Consent:
    """One subject (kind, project folder, name) against the person's approval. `current` is the subject as
    read (None: absent); `approved_text` is kept only where a kind needs it (the rules' fallback)."""

    kind: ConsentKind
    project_dir: str
    name: str  # "" for a project's single file; the server name for MCP
    status: ConsentStatus
    current: str | None  # the subject's text as read, None when absent
    digest: str | None  # the sha256 of the current subject
    approved_digest: str | None = None
    approved_text: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in (ConsentStatus.NONE, ConsentStatus.APPROVED)

    @property
    def label(self) -> str:
        """How the person names the subject: "rules", "hooks" or "mcp server NAME"."""
        return f"{self.kind.value} server {self.name}" if self.name else self.kind.value
