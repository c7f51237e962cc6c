"""Approvals as data: a person's answer to a call that waits in APPROVAL_REQUIRED.

A front end (the window's inbox, the CLI's prompt) answers `Executor.decide(call_id, Allow(...) | Deny(...))`
with these types as they are; nothing is copied field for field.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Literal


class ApprovalScope(StrEnum):
    """How far an allow reaches: this call, the rest of the session, or the project's rules file."""

    ONCE = "once"
    SESSION = "session"
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call. `edited_input` replaces its input (validated again, recorded); for SESSION and
    ALWAYS, `rule` is the rule text to add (default: the rule the policy suggests for the call)."""

    scope: ApprovalScope = ApprovalScope.ONCE
    edited_input: dict[str, Any] | None = None
    rule: str | None = None
    by: str = "user"
    note: str = ""
    kind: ClassVar[Literal["allow"]] = "allow"


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the note goes back to the model with the denial."""

    note: str = ""
    by: str = "user"
    kind: ClassVar[Literal["deny"]] = "deny"


ApprovalDecision = Allow | Deny
