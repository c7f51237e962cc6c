"""Consent: the person approved an agent-writable (or repository-shipped) project file as it is now. The
kinds of subject and their one status enum, below the runtime (its Consent) and mcp_client (its grant check)."""

from __future__ import annotations

from enum import StrEnum


class ConsentKind(StrEnum):
    """What a consent is about. A new kind is a member here and one entry in the runtime's kind registry."""

    RULES = "rules"  # .agent-desk/rules.toml
    HOOKS = "hooks"  # .agent-desk/hooks.toml
    MCP = "mcp"  # one server entry of .agent-desk/mcp.json that asks for a relaxation
    TEMPLATE = "template"  # one agent template of .agent-desk/templates/ (its file's bytes)
    SKILLS = "skills"  # the project's skills, .agent-desk/skills/*/SKILL.md, as one set
    INSTRUCTIONS = "instructions"  # AGENTS.md and CLAUDE.md at the project root, as one set
    NETWORK = "network-list"  # .agent-desk/network.toml: the domains a repository asks its sessions to reach


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
