"""FakeDesk: the window's desk over a real store and bus, whose sessions come from the test's own factory (a fake
agent, or an AgentSession on an executor the test built), so window tests need no runtime, sandbox or model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from desktop_app.config import Settings
from desktop_app.core import AgentDeskError, EventBus, ProjectInfo
from desktop_app.runtime import Desk

# (project, session id or None) -> what the window drives: running, send, stop, retry, compact, executor
SessionFactory = Callable[[ProjectInfo, str | None], Awaitable[Any]]


class FakeDesk(Desk):
    """A Desk whose `open_session` is `factory`; without one, opening a session fails as an engine-less desk."""

    def __init__(self, *, store: Any, bus: EventBus, settings: Settings | None = None,
                 factory: SessionFactory | None = None, api_key_source: str | None = None) -> None:
        super().__init__(settings=settings or Settings(path=None), store=store, bus=bus,
                         api_key_source=api_key_source)
        self.factory = factory

    async def open_session(self, project: ProjectInfo, session_id: str | None) -> Any:
        if self.factory is None:
            raise AgentDeskError("The agent engine is not available in this build.")
        return await self.factory(project, session_id)
