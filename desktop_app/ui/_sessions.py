"""Opens AgentSessions for the window: one executor, policy and sandbox per project, shared by its
sessions, so an approval from any session reaches the executor that is waiting for it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ..core import ProjectInfo

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ProjectRuntime:
    project: ProjectInfo
    executor: Any
    tools: list[Any]
    sandbox: Any
    started: asyncio.Task | None = None


class SessionFactory:
    """`await factory(project, session_id)` -> an open AgentSession (the sandbox starts in the background)."""

    def __init__(self, *, settings: Any, store: Any, bus: Any, sandbox_factory: Any = None) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.sandbox_factory = sandbox_factory  # (project) -> Sandbox; default: sandbox.create_sandbox
        self.runtimes: dict[str, ProjectRuntime] = {}
        self._model: Any = None
        self._closing: set[asyncio.Future] = set()
        self._runtime_lock = asyncio.Lock()

    async def runtime(self, project: ProjectInfo) -> ProjectRuntime:
        """The project's executor, tools and sandbox, wired by engine.build_executor on the window's one
        store and one bus (build_engine opens its own bus and closes the store it is given)."""
        async with self._runtime_lock:  # two sessions of one project opening at once share one runtime
            return await self._runtime(project)

    async def _runtime(self, project: ProjectInfo) -> ProjectRuntime:
        rt = self.runtimes.get(project.id)
        if rt is not None and rt.project == project:
            return rt
        if rt is not None:  # the project's settings changed: its old container goes
            self._closing.add(asyncio.ensure_future(rt.sandbox.close()))
        from ..runtime import build_executor

        # rules files and the keyring are read on a worker thread, never on the GUI thread
        executor, registry, _ = await asyncio.get_running_loop().run_in_executor(
            None, lambda: build_executor(self.settings, project, bus=self.bus, store=self.store)
        )
        if self.sandbox_factory is not None:
            sandbox = self.sandbox_factory(project)
        else:
            from ..sandbox import create_sandbox

            sandbox = create_sandbox(project)
        rt = ProjectRuntime(project, executor, registry.for_profile("coding"), sandbox)
        rt.started = asyncio.ensure_future(sandbox.start())
        self.runtimes[project.id] = rt
        return rt

    async def __call__(self, project: ProjectInfo, session_id: str | None) -> Any:
        from ..core import AgentSession
        from ..runtime import model_client_from_settings

        rt = await self.runtime(project)
        if rt.started is not None:
            await asyncio.shield(rt.started)  # a sandbox that cannot start is reported to the person here
        if self._model is None:
            self._model = model_client_from_settings(self.settings)
        return await AgentSession.open(
            store=self.store, bus=self.bus, executor=rt.executor, tools=rt.tools, model_client=self._model,
            project=project, sandbox=rt.sandbox, session_id=session_id,
            max_steps=getattr(self.settings, "max_steps", 50),
        )

    def forget_model(self) -> None:
        """Settings changed (key, model, endpoint): the next session gets a new client."""
        self._model = None

    async def close(self) -> None:
        if self._model is not None and hasattr(self._model, "close"):
            try:
                await self._model.close()
            except Exception:
                log.exception("closing the model client failed")
        for rt in self.runtimes.values():
            try:
                await rt.sandbox.close()
            except Exception:
                log.exception("closing the sandbox of %s failed", rt.project.name)
        self.runtimes.clear()
