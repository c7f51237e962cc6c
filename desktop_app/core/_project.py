"""Projects and their sessions: what the store keeps about a host folder and each conversation in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._record import new_id, now
from ._sandbox import DEFAULT_IMAGE


@dataclass(slots=True)
class ProjectInfo:
    """A project: a host folder and how its sandbox and permissions are set."""

    id: str
    name: str
    path: str
    image: str = DEFAULT_IMAGE
    permission_mode: str = "ask"
    settings: dict[str, Any] = field(default_factory=dict)  # network, memory, cpus, workspace_ro, sandbox kind
    created_at: float = field(default_factory=now)


@dataclass(slots=True)
class SessionInfo:
    """One conversation of a project, with the model it talks to."""

    id: str
    project_id: str
    title: str = ""
    model: str = ""
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)
    meta: dict[str, Any] = field(default_factory=dict)


def title_from(text: str, limit: int = 60) -> str:
    """A session's title from a prompt: its first line, spaces collapsed, cut at a word near `limit`."""
    line = " ".join(next((ln for ln in text.splitlines() if ln.strip()), "").split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[: limit] else line[:limit]
    return cut.rstrip(" .,;:") + "…"


def new_session(project_id: str, title: str = "", model: str = "") -> SessionInfo:
    return SessionInfo(id=new_id("ses_"), project_id=project_id, title=title, model=model)
