"""A session's own permission mode (Shift+Tab, the mode picker, an approved plan), kept with the session so a
restart reopens it in the mode it was in; each change is said in the session's notices, which stay with it."""

from __future__ import annotations

import logging
from typing import Any

from ..core import AgentSession, PermissionMode, SessionInfo, SessionNotice

log = logging.getLogger(__name__)

MODE_KEY = "permission_mode"  # SessionInfo.meta: the mode the person chose for the session (or a plan's)


def stored_session_mode(session: SessionInfo | None) -> str | None:
    """The mode kept with the session; None when none was chosen (or what is kept is not a mode)."""
    value = ((session.meta or {}) if session is not None else {}).get(MODE_KEY)
    try:
        return PermissionMode(value).value if value else None
    except ValueError:
        log.warning("session %s keeps an unknown mode %r: its project's applies", session.id, value)
        return None


def apply_stored_mode(agent: AgentSession) -> str | None:
    """An opened (or reopened) session's agent judges its calls in the mode kept with it."""
    mode = stored_session_mode(agent.session)
    if mode is not None:
        agent.policy.set_session_mode(agent.session.id, PermissionMode(mode))
    return mode


async def remember_session_mode(store: Any, bus: Any, session_id: str, mode: str, why: str) -> bool:
    """Keep `mode` with the session (read fresh: a title or a mark written since is kept) and say the change in
    its notices; False when the session is gone or already in that mode."""
    mode = PermissionMode(mode).value
    fresh = await store.get_session(session_id)
    if fresh is None or (fresh.meta or {}).get(MODE_KEY) == mode:
        return False
    fresh.meta = {**(fresh.meta or {}), MODE_KEY: mode}
    await store.save_session(fresh)
    text = f"Mode: {mode} ({why}), from the next call on."
    bus.publish(SessionNotice(session_id=session_id, level="info", text=text))
    return True
