"""A session's instructions at its start: read off the event loop (your AGENTS.md, the project's approved
AGENTS.md and CLAUDE.md), put in its system prompt by the recipe, and recorded: in the session's row (which
files, how many bytes, what was left out) and as a session notice the window shows (again after a restart)
and the store keeps."""

from __future__ import annotations

import asyncio
from typing import Any

from ..config import Settings
from ..core import AgentDeskError, EventBus, Instructions, ProjectInfo, SessionInfo, SessionNotice
from ._consent import project_instructions

INSTRUCTIONS_KEY = "instructions"  # in the session's meta


async def session_instructions(settings: Settings, project: ProjectInfo) -> tuple[Instructions, str]:
    """The instructions of a session starting now, and why none could be read ("" when all was well)."""
    try:
        return await asyncio.to_thread(project_instructions, settings, project), ""
    except AgentDeskError as e:  # a link planted at AGENTS.md, an unreadable file: none, and said so
        return Instructions(), e.user_message()


async def record_instructions(store: Any, bus: EventBus, session: SessionInfo, instructions: Instructions,
                              problem: str) -> None:
    if not instructions.files and not problem:
        return
    session.meta = {**(session.meta or {}), INSTRUCTIONS_KEY: [f.to_dict() for f in instructions.files]}
    await store.save_session(session)
    text = f"instructions not read: {problem}" if problem else instructions.summary()
    level = "warning" if problem or any(f.why_not for f in instructions.files) else "info"
    bus.publish(SessionNotice(session_id=session.id, text=text, level=level))
