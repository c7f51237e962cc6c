"""The mode each session's calls are judged in, as the window shows and switches it: the open agent's, else the
one the person chose (or a plan approved into) for the session, else its project's. A component the controller
holds; the picker under the prompt follows the session in view."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import AgentSession, ProjectInfo, SessionInfo
from ..runtime import MODE_KEY, stored_session_mode
from ._tasks import BackgroundTasks

if TYPE_CHECKING:
    from ..runtime import Desk
    from ._mainwindow import MainWindow


class SessionModes:
    """Per-session modes, applied to a session's agent when it opens and from its next call, and kept with the
    session in the store (a restart reopens it in the mode it was in)."""

    def __init__(self, window: MainWindow, desk: Desk, agents: dict[str, AgentSession],
                 current: Callable[[], str | None], project_of: Callable[[str], ProjectInfo | None],
                 session_of: Callable[[str], SessionInfo | None] = lambda _sid: None) -> None:
        self.window = window
        self.session_of = session_of  # the window's copy of a session (its meta keeps the mode)
        self.tasks = BackgroundTasks()
        self._writing = asyncio.Lock()  # the mode's writes to the store, in order
        self._latest: dict[str, tuple[str, str]] = {}  # session -> (mode, why) last chosen, what a write stores
        self.desk = desk
        self.agents = agents  # the controller's open agents, by session id
        self.current = current
        self.project_of = project_of
        self.chosen: dict[str, str] = {}  # a mode the person chose for a session (or its approved plan's)

    def mode_of(self, session_id: str) -> str:
        """The mode the session's next call is judged in."""
        agent = self.agents.get(session_id)
        if agent is not None:
            return self.desk.session_mode(agent)
        if session_id in self.chosen:
            return self.chosen[session_id]
        if kept := stored_session_mode(self.session_of(session_id)):
            return kept
        project = self.project_of(session_id)
        return project.permission_mode if project else self.desk.settings.permission_mode

    def opened(self, session_id: str, agent: AgentSession) -> None:
        """A session's agent opened: the mode chosen before it opened (or before it reopened) applies."""
        if session_id in self.chosen:
            self.desk.set_session_mode(agent, self.chosen[session_id])

    def set_mode(self, mode: str) -> None:
        """The person switched the current session's mode: from its next call on (the project keeps its own)."""
        sid = self.current()
        if sid is None:
            self.window.mode_picker.set_mode(self.desk.settings.permission_mode)
            return
        self.chosen[sid] = mode
        agent = self.agents.get(sid)
        if agent is not None:
            self.desk.set_session_mode(agent, mode)
        self._keep(sid, mode, "you chose it")

    def _keep(self, session_id: str, mode: str, why: str) -> None:
        """The mode kept with the session (off the loop, in the store) and in the window's copy of it."""
        self._latest[session_id] = (mode, why)
        self.tasks.spawn(self._remember(session_id))

    async def _remember(self, session_id: str) -> None:
        """One write at a time, each of the latest choice: Shift+Tab pressed fast through the modes stores (and
        says) where the person stopped, never an earlier mode that happened to be written last."""
        async with self._writing:
            mode, why = self._latest[session_id]
            await self.desk.remember_session_mode(session_id, mode, why)
        session = self.session_of(session_id)
        if session is not None:  # a later save of the window's copy (a rename) keeps the mode too
            session.meta = {**(session.meta or {}), MODE_KEY: mode}

    def plan_answered(self, ev: Any) -> None:
        """A plan approved into a mode: the session is in that mode now, and the picker says so."""
        if ev.kind == "plan" and ev.answered and ev.mode:
            self.chosen[ev.session_id] = ev.mode
            self._keep(ev.session_id, ev.mode, "the plan was approved")
            if ev.session_id == self.current():
                self.window.mode_picker.set_mode(ev.mode)
