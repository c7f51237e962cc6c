"""Opening runtimes: the CLI's one project with its own store and bus (`open_runtime`), the window's runtime
per project on its one store and bus (`ProjectRuntimes`), and the Desk, the window's one link to the engine."""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings, default_db_url, desk_signing_key, witness_dir
from ..core import (
    DEFAULT_IMAGE,
    AgentSession,
    Answer,
    ApprovalDecision,
    ConfigError,
    EventBus,
    McpServerInfo,
    ModelClient,
    PermissionMode,
    ProjectInfo,
    Tool,
    ToolCallRecord,
    new_id,
)
from ._consent import consent_stamp
from ._liveness import mark_closed_here, seal_abandoned
from ._mcp import CompanionFactory
from ._orphans import sweep_crashed_containers
from ._recipe import ProjectRuntime, SandboxFactory, build_runtime
from ._session_mode import apply_stored_mode, remember_session_mode

if TYPE_CHECKING:
    from ..store import HeadSigner, SqlStore

log = logging.getLogger(__name__)


# the CLI: one project, with its own store and bus -----------------------------------------------------
async def open_store(db_url: str | None = None) -> SqlStore:
    """The SqlStore at `db_url` (a URL or a path), $AGENT_DESK_DB, or the default file in the user's data
    folder (the store creates a SQLite file's folder), signing its heads with this installation's key."""
    from ..store import SqlStore

    signer = await asyncio.to_thread(head_signer)
    return await SqlStore.open(db_url or default_db_url(), signer=signer)


def head_signer() -> HeadSigner:
    """This installation's audit signer: its key (keyring, else a 0600 file) and its witness folder.
    Blocking (the keyring may ask the system): call it off the event loop."""
    from ..store import HeadSigner

    return HeadSigner(desk_signing_key().seed, witness_dir=witness_dir())


def project_dir(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"The project folder {path} does not exist.")
    return path


async def project_for_dir(store: Any, folder: str | os.PathLike[str], *, image: str | None = None,
                          settings: Settings | None = None) -> ProjectInfo:
    """The stored project for `folder` (matched by its absolute path), or a new one."""
    path = project_dir(folder)
    for p in await store.list_projects():
        if Path(p.path) == path:
            if image and image != p.image:
                p.image = image
                await store.save_project(p)
            return p
    project = ProjectInfo(id=new_id("prj_"), name=path.name, path=str(path),
                          image=image or (settings.default_image if settings else DEFAULT_IMAGE))
    if settings is not None:
        project.permission_mode = settings.permission_mode
        if settings.sandbox != "docker":
            project.settings["sandbox"] = settings.sandbox
    await store.save_project(project)
    return project


async def open_runtime(
    settings: Settings,
    project: ProjectInfo | str | os.PathLike[str],
    *,
    db_url: str | None = None,
    store: Any = None,
    sandbox_factory: SandboxFactory | None = None,
    model_client: ModelClient | None = None,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
    profile: str | None = None,
    companion_factory: CompanionFactory | None = None,
    template: str | None = None,
) -> ProjectRuntime:
    """A started runtime for one project (a ProjectInfo or a folder) with its own bus, on `store` or the
    store at `db_url`, its MCP servers started (each ready or failed); closing it closes the store too."""
    store = store or await open_store(db_url)
    cleanup = AsyncExitStack()
    cleanup.push_async_callback(store.close)
    try:
        if not isinstance(project, ProjectInfo):
            project = await project_for_dir(store, project, settings=settings)
        elif await store.get_project(project.id) is None:
            await store.save_project(project)
        bus = await EventBus.open(store)
        cleanup.callback(bus.close)
        runtime = await build_runtime(settings, project, store=store, bus=bus, sandbox_factory=sandbox_factory,
                                      model_client=model_client, permission_mode=permission_mode, tools=tools,
                                      profile=profile, cleanup=cleanup, companion_factory=companion_factory,
                                      template=template)
        await runtime.ready()
        if runtime.mcp is not None:
            await runtime.mcp.wait_started()
    except BaseException:
        await cleanup.aclose()
        raise
    return runtime


# the window: a runtime per project on the window's one store and bus ------------------------------------
class ProjectRuntimes:
    """The window's runtimes, one per project, built on first use by the same recipe as the CLI's;
    `await runtimes(project, session_id)` is an open AgentSession (the sandbox starts in the background)."""

    def __init__(self, *, settings: Settings, store: Any, bus: EventBus,
                 sandbox_factory: SandboxFactory | None = None,
                 companion_factory: CompanionFactory | None = None) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.sandbox_factory = sandbox_factory  # default: a leased create_sandbox (_orphans)
        self.companion_factory = companion_factory  # default: the sandbox's own `companion`, if it has one
        self.runtimes: dict[str, ProjectRuntime] = {}
        self._stale_clients: set[str] = set()  # projects whose model client predates the settings
        self._closing: set[asyncio.Future[None]] = set()
        self._applying: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()

    async def get(self, project: ProjectInfo) -> ProjectRuntime:
        """The project's runtime; two sessions of one project opening at once share one."""
        async with self._lock:
            rt = self.runtimes.get(project.id)
            if rt is not None and rt.project == project and rt.consent_stamp == await asyncio.to_thread(
                    consent_stamp, project):
                return rt
            if rt is not None:  # the project's settings or approvals changed: its old container goes
                self._closing.add(asyncio.ensure_future(rt.close()))
            rt = await build_runtime(self.settings, project, store=self.store, bus=self.bus,
                                     sandbox_factory=self.sandbox_factory,
                                     companion_factory=self.companion_factory)
            rt.start()
            self._stale_clients.discard(project.id)
            self.runtimes[project.id] = rt
            return rt

    async def __call__(self, project: ProjectInfo, session_id: str | None) -> AgentSession:
        rt = await self.get(project)
        if project.id in self._stale_clients:
            self._stale_clients.discard(project.id)
            await rt.renew_model_client()
        return await rt.open_session(session_id)  # a sandbox that cannot start is reported here

    async def reload_rules(self, project: ProjectInfo) -> None:
        """The person trusted the project's rules: its open runtime (if any) uses them from the next call."""
        rt = self.runtimes.get(project.id)
        if rt is not None:
            await rt.reload_rules()

    def forget_model(self) -> None:
        """Settings changed (key, model, endpoint): each project's next session gets a new client."""
        self._stale_clients = set(self.runtimes)
        for rt in self.runtimes.values():  # and the default approval expiry and the hooks reach them
            task = asyncio.ensure_future(rt.apply_settings())
            self._applying.add(task)
            task.add_done_callback(self._applied)

    def _applied(self, task: asyncio.Future[None]) -> None:
        self._applying.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the dialog checked them: a file changed
            log.error("the new settings could not be applied: %s", task.exception())

    async def settings_applied(self) -> None:
        """Wait until the last settings change reached every open runtime."""
        if self._applying:
            await asyncio.gather(*self._applying, return_exceptions=True)

    async def close(self) -> None:
        await self.settings_applied()
        for rt in self.runtimes.values():
            await rt.close()
        self.runtimes.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


# the front ends' one link to the engine -------------------------------------------------------------------
class Desk:
    """What the window holds: the settings, the store, the bus and every project's runtime. It opens projects
    and sessions, answers approvals and questions, and asks the store and the runtimes what the window shows.
    Store and Docker calls stay off the event loop (the store and the runtimes run them in threads)."""

    def __init__(self, *, settings: Settings, store: SqlStore, bus: EventBus,
                 runtimes: ProjectRuntimes | None = None, api_key_source: str | None = None) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.runtimes = runtimes if runtimes is not None else ProjectRuntimes(settings=settings, store=store, bus=bus)
        self.api_key_source = api_key_source  # where the API key comes from ("env", "keyring", ...), or None

    # projects and sessions
    async def open_session(self, project: ProjectInfo, session_id: str | None) -> AgentSession:
        """The session, open on its project's runtime (built on first use; its sandbox starts then), in the mode
        kept with it (the person's choice survives a restart)."""
        agent = await self.runtimes(project, session_id)
        apply_stored_mode(agent)
        return agent

    def runtime(self, project_id: str) -> ProjectRuntime | None:
        """The project's runtime when one is open."""
        return self.runtimes.runtimes.get(project_id)

    async def project_for_dir(self, folder: str | os.PathLike[str]) -> ProjectInfo:
        """The stored project for `folder`, or a new one made with the settings' defaults."""
        return await project_for_dir(self.store, folder, settings=self.settings)

    async def seal_abandoned(self) -> list[str]:
        """Seal the calls a gone process left open (each session told, its agent shown stopped); the sessions
        that had some, the one whose calls were latest first."""
        sealed = await seal_abandoned(self.store, self.bus)
        if not sealed:
            return []
        await self.store.flush()  # the notices and sealed calls are read back by the views
        return sorted(sealed, key=lambda sid: -max(r.created_at for r in sealed[sid]))

    async def sweep_orphans(self) -> list[str]:
        """At start: remove the sandbox containers a crashed desk left running (no live desk process holds
        them); never one another desk process uses. Off the loop; never raises."""
        return await sweep_crashed_containers()

    async def mark_closed_here(self, session_id: str) -> None:
        await mark_closed_here(self.store, session_id)

    # approvals and questions
    async def pending_approvals(self) -> list[ToolCallRecord]:
        """The calls still waiting for the person, from an earlier run of the app too."""
        return await self.store.pending_approvals()

    def decide(self, session: AgentSession, call_id: str, decision: ApprovalDecision) -> None:
        """The person's answer, to the executor the session's call waits on."""
        session.executor.decide(call_id, decision)

    def answer(self, session: AgentSession, question_id: str, answer: Answer) -> None:
        session.executor.questions.answer(question_id, answer)

    @staticmethod
    def session_mode(session: AgentSession) -> str:
        """The permission mode the session's next call is judged in (its own, else its project's)."""
        return session.policy.mode_for(session.session.id).value

    @staticmethod
    def set_session_mode(session: AgentSession, mode: str) -> None:
        """Put one session in `mode` (plan included) from its next call on; its project keeps its own mode."""
        session.policy.set_session_mode(session.session.id, PermissionMode(mode))

    async def remember_session_mode(self, session_id: str, mode: str, why: str = "you chose it") -> bool:
        """Keep the session's mode with it (a restart reopens it so) and say the change in its notices."""
        return await remember_session_mode(self.store, self.bus, session_id, mode, why)

    async def preview_diff(self, session: AgentSession, name: str, tool_input: dict[str, Any]) -> str | None:
        """The diff an edit tool's call would make, read in the session's sandbox; None for other tools."""
        if session.sandbox is None:
            return None
        from ..tools import preview_diff

        return await preview_diff(name, tool_input, session.sandbox)

    # what the settings and the projects' files change
    async def reload_rules(self, project: ProjectInfo) -> None:
        """The project's rules were trusted or edited: its open runtime uses them from the next call."""
        await self.runtimes.reload_rules(project)

    def forget_model(self) -> None:
        """The settings changed (key, model, endpoint): each project's next session gets a new client."""
        self.runtimes.forget_model()

    def mcp_servers(self, project_id: str) -> list[McpServerInfo] | None:
        """The status of the project's MCP servers now, or None when no runtime of it is open."""
        rt = self.runtime(project_id)
        return rt.mcp_servers() if rt is not None else None

    async def close(self) -> None:
        """Close every project's runtime (the store is its opener's to close)."""
        await self.runtimes.close()
