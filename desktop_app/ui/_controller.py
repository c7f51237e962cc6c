"""AppController: feeds the main window from the store and the event bridge, and turns what the person
does (send, stop, approve, edit settings) into engine calls. Every await here runs on the qasync loop."""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from ..core import (
    AgentDeskError,
    Channel,
    Done,
    ErrorEvent,
    EventBus,
    PermissionDecided,
    PermissionRequired,
    ProjectInfo,
    SessionInfo,
    StateChanged,
    TokenUsage,
    ToolCallState,
    ToolEnd,
    ToolError,
    ToolStart,
    ToolUpdate,
    new_id,
)
from ._bridge import EventBridge
from ._inbox import InboxDecision, PendingApproval
from ._mainwindow import MainWindow
from ._projects import session_title
from ._theme import bring_to_front

log = logging.getLogger(__name__)

# (project, session_id or None) -> an object with: session, running, send(text), stop(), and the
# executor that owns its approvals (`executor.decide(call_id, Decision)`).
AgentFactory = Callable[[ProjectInfo, str | None], Awaitable[Any]]


class AppController(QObject):
    sessionChanged = Signal(str)
    dockerChecked = Signal(bool, str)
    turnFinished = Signal(str, object)  # session id, TurnResult or exception

    def __init__(
        self,
        window: MainWindow,
        *,
        store: Any,
        bus: EventBus,
        settings: Any = None,
        agent_factory: AgentFactory | None = None,
        api_key_source: str | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.store = store
        self.bus = bus
        self.settings = settings
        self.agent_factory = agent_factory
        self.api_key_source = api_key_source
        self.bridge = EventBridge(bus, self)
        self.current_session: str | None = None
        self.agents: dict[str, Any] = {}  # session id -> open AgentSession
        self.sessions: dict[str, SessionInfo] = {}
        self.docker_ok: bool | None = None
        self.docker_message = ""
        self._tasks: set[asyncio.Task] = set()
        self._history_window = None
        self.history_loading: asyncio.Task | None = None
        self._connect()

    # plumbing --------------------------------------------------------------------------------------
    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        """Run a coroutine on the loop, keep a reference, and show its failure instead of losing it."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        msg = exc.user_message() if isinstance(exc, AgentDeskError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, AgentDeskError):
            log.error("background task failed", exc_info=exc)
        self.window.conversation.add_notice(f"⚠ {msg}", "#d9363e")

    def _connect(self) -> None:
        w, b = self.window, self.bridge
        b.textChunk.connect(self._on_text)
        b.toolStarted.connect(self._on_tool_start)
        b.stateChanged.connect(self._on_state)
        b.toolUpdated.connect(self._on_update)
        b.toolEnded.connect(self._on_end)
        b.toolErrored.connect(self._on_tool_error)
        b.permissionRequired.connect(self._on_permission_required)
        b.permissionDecided.connect(self._on_permission_decided)
        b.tokenUsage.connect(self._on_usage)
        b.turnDone.connect(self._on_done)
        b.errorOccurred.connect(self._on_error)
        w.promptSubmitted.connect(lambda text: self.spawn(self.send(text)))
        w.stopRequested.connect(self.stop)
        w.inbox.decided.connect(lambda d: self.spawn(self.decide(d)))
        w.inbox.rules_target = self._rules_target
        w.inbox.preview_provider = self._preview_diff
        w.sidebar.sessionActivated.connect(lambda sid: self.spawn(self.select_session(sid)))
        w.sidebar.newSessionRequested.connect(lambda pid: self.spawn(self.new_session(pid)))
        w.sidebar.newProjectRequested.connect(lambda: self.spawn(self.edit_project(None)))
        w.sidebar.projectSettingsRequested.connect(lambda pid: self.spawn(self.edit_project(pid)))
        w.settingsRequested.connect(lambda: self.spawn(self.edit_settings()))
        w.historyRequested.connect(self.open_history)
        w.timeline.detailsRequested.connect(lambda cid: self.spawn(self._refresh_record(cid)))

    # start-up --------------------------------------------------------------------------------------
    async def start(self, *, check_docker: bool = True) -> None:
        """Fill the sidebar, restore the inbox, say what is missing; Docker is probed in the background."""
        self.window.status.set_model(getattr(self.settings, "model", "") or "–")
        self.check_api_key()
        if check_docker:
            self.window.status.set_sandbox("checking…")
            self.spawn(self.check_docker())
        await self.reload_projects()
        await self.restore_approvals()
        if self.current_session is None:
            first = next(iter(sorted(self.sessions.values(), key=lambda s: -s.updated_at)), None)
            if first is not None:
                self.window.sidebar.select_session(first.id)
                await self.select_session(first.id)

    async def reload_projects(self) -> None:
        projects = await self.store.list_projects()
        sessions = await self.store.list_sessions()
        self.sessions = {s.id: s for s in sessions}
        self.window.projects_model.set_data(projects, sessions)
        if not projects:
            self.window.banner.set_item(
                "project", "No project yet: add a folder the agent may work in.",
                [("Add project…", lambda: self.spawn(self.edit_project(None)))])
        else:
            self.window.banner.clear_item("project")

    async def restore_approvals(self) -> None:
        """Calls still waiting from an earlier run of the app: shown now, answered once the session reopens."""
        fn = getattr(self.store, "pending_approvals", None)
        if fn is None:
            return
        for rec in await fn():
            item = PendingApproval.from_record(rec)
            item.session_title = self._session_title(rec.session_id)
            self.window.inbox.add(item)

    def check_api_key(self) -> bool:
        if self.api_key_source:
            self.window.banner.clear_item("api_key")
            return True
        self.window.banner.set_item(
            "api_key",
            "<b>No API key.</b> The agent cannot answer until you set one (kept in the system keyring). "
            "History and the image catalog work without it.",
            [("Set API key…", lambda: self.spawn(self.edit_settings()))])
        return False

    async def check_docker(self) -> bool:
        """Ping the engine on a worker thread: the docker SDK is imported and connected off the GUI thread."""
        def ping() -> tuple[bool, str]:
            from ..sandbox import connect

            try:
                client = connect()
            except AgentDeskError as exc:
                return False, str(exc)
            try:
                return True, f"Docker {client.version().get('Version', '?')}"
            except Exception as exc:
                return False, str(exc).splitlines()[0][:200]
            finally:
                client.close()

        ok, message = await asyncio.get_running_loop().run_in_executor(None, ping)
        self.docker_ok, self.docker_message = ok, message
        if ok:
            self.window.banner.clear_item("docker")
            project = self._current_project()
            if project is not None:
                self._show_project_sandbox(project)
            else:
                self.window.status.set_sandbox("ready", network="none")
        else:
            self.window.status.set_sandbox("unavailable")
            self.window.banner.set_item(
                "docker",
                "<b>Docker: not available</b> — start Docker (or set DOCKER_HOST) and retry, or choose the "
                "local (unsandboxed) sandbox in a project's settings. History and the image catalog work "
                f"without it.<br><small>{html.escape(message[:200])}</small>",
                [("Retry", lambda: self.spawn(self.check_docker())), ("History…", self.open_history)])
        self.dockerChecked.emit(ok, message)
        return ok

    # sessions --------------------------------------------------------------------------------------
    def _session_title(self, session_id: str) -> str:
        s = self.sessions.get(session_id)
        return session_title(s) if s else session_id[-8:]

    async def select_session(self, session_id: str) -> None:
        if session_id == self.current_session:
            return
        self.current_session = session_id
        w = self.window
        w.timeline_model.clear()
        w.conversation.clear_conversation()
        session = self.sessions.get(session_id) or await self.store.get_session(session_id)
        project = w.projects_model.project(session.project_id) if session else None
        w.session_label.setText(f"{project.name if project else ''} › {session_title(session)}" if session else "")
        known_usage = w.status.has_usage(session_id)
        records, messages, monitor = await asyncio.gather(
            self.store.session_records(session_id),
            self.store.messages(session_id),
            # a session from an earlier run: its token count is in the persisted monitor events
            self.store.events_since(0, [Channel.MONITOR], session_id=session_id) if not known_usage
            else asyncio.sleep(0, []),
        )
        if self.current_session != session_id:
            return
        if not w.status.has_usage(session_id):
            for env in monitor:
                if env.type == TokenUsage.type:
                    w.status.add_usage(env.event)
        records.sort(key=lambda r: (r.created_at, r.batch_index))
        w.timeline_model.add_records(records)
        w.conversation.load_messages(messages, {r.id: r.state.value for r in records})
        agent = self.agents.get(session_id)
        w.set_running(bool(agent and agent.running))
        w.status.show_session(session_id)
        if project is not None:
            self._show_project_sandbox(project)
        self.sessionChanged.emit(session_id)

    def _current_project(self) -> ProjectInfo | None:
        session = self.sessions.get(self.current_session or "")
        return self.window.projects_model.project(session.project_id) if session else None

    def _show_project_sandbox(self, project: ProjectInfo) -> None:
        if self.docker_ok is False:
            return
        net = "on" if (project.settings or {}).get("network") else "none"
        status = "ready" if self.docker_ok else "checking…"
        w = self.window.status
        w.set_sandbox(status, project.image, net, unsafe=(project.settings or {}).get("sandbox") == "local")

    async def new_session(self, project_id: str, title: str = "") -> SessionInfo:
        session = SessionInfo(id=new_id("ses_"), project_id=project_id, title=title,
                              model=getattr(self.settings, "model", ""))
        await self.store.save_session(session)
        self.sessions[session.id] = session
        self.window.projects_model.upsert_session(session)
        self.window.sidebar.select_session(session.id)
        await self.select_session(session.id)
        return session

    async def agent_for(self, session_id: str) -> Any:
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent
        if self.agent_factory is None:
            raise AgentDeskError("The agent engine is not available in this build.")
        session = self.sessions.get(session_id) or await self.store.get_session(session_id)
        project = self.window.projects_model.project(session.project_id) if session else None
        if project is None:
            raise AgentDeskError("Pick a project (or add one) before sending a message.")
        agent = await self.agent_factory(project, session_id)
        self.agents[session_id] = agent
        self._show_sandbox(agent)
        return agent

    def _show_sandbox(self, agent: Any) -> None:
        """The running sandbox as it describes itself: engine, image, network, and UNSANDBOXED if local."""
        try:
            d = agent.sandbox.describe()
        except Exception:
            return
        label = "running" if not d.unsandboxed else "local"
        self.window.status.set_sandbox(label, d.image or "", d.network or "none", unsafe=d.unsandboxed)

    async def send(self, text: str) -> Any:
        w = self.window
        if self.current_session is None:
            pid = w.sidebar.current_project_id() or (w.projects_model.projects()[0].id
                                                     if w.projects_model.projects() else None)
            if pid is None:
                raise AgentDeskError("Add a project first: File › New project…")
            await self.new_session(pid, title=text[:60])
        sid = self.current_session
        assert sid is not None
        session = self.sessions.get(sid)
        if session is not None and not session.title:
            session.title = text[:60]
            self.window.projects_model.upsert_session(session)
        w.conversation.add_user_message(text)
        agent = await self.agent_for(sid)
        w.set_running(True)
        try:
            result = await agent.send(text)
        except Exception as exc:
            self.turnFinished.emit(sid, exc)
            raise
        finally:
            if self.current_session == sid:
                w.set_running(False)
                w.conversation.finish_message()
        self.turnFinished.emit(sid, result)
        return result

    def stop(self) -> None:
        agent = self.agents.get(self.current_session or "")
        if agent is not None and agent.running:
            agent.stop()
            self.window.conversation.add_notice("Stopping…")

    # approvals -------------------------------------------------------------------------------------
    async def decide(self, d: InboxDecision) -> None:
        from ..core import Allow, ApprovalScope, Deny

        agent = await self.agent_for(d.session_id)
        executor = getattr(agent, "executor", None)
        if executor is None:
            raise AgentDeskError("This session cannot take decisions (no executor).")
        try:
            decision = (Allow(ApprovalScope(d.scope), d.edited_input, d.rule, note=d.note) if d.allow
                        else Deny(note=d.note))
            executor.decide(d.call_id, decision)
        except KeyError:
            # Not pending in this run any more (expired, decided elsewhere): drop the stale card.
            pass
        self.window.inbox.remove(d.call_id)

    def _rules_target(self, item: PendingApproval) -> str:
        from ..core import project_rules_path

        s = self.sessions.get(item.session_id)
        project = self.window.projects_model.project(s.project_id) if s else None
        return str(project_rules_path(project.path)) if project else ".agent-desk/rules.toml"

    async def _preview_diff(self, item: PendingApproval) -> str | None:
        agent = self.agents.get(item.session_id)
        sandbox = getattr(agent, "sandbox", None)
        if sandbox is None:
            return None
        from ..tools import preview_diff

        return await preview_diff(item.name, item.input, sandbox)

    # events -> views -------------------------------------------------------------------------------
    def _on_text(self, session_id: str, message_id: str, text: str) -> None:
        if session_id == self.current_session:
            self.window.conversation.append_chunk(message_id, text)

    def _on_tool_start(self, ev: ToolStart) -> None:
        if ev.session_id != self.current_session:
            return
        self.window.timeline_model.upsert_started(ev.call_id, ev.name, ev.input, ev.session_id, time.time())
        if not ev.partial or not self.window.conversation.has_card(ev.call_id):
            self.window.conversation.add_tool_card(ev.call_id, ev.name, ev.input)

    def _on_state(self, ev: StateChanged) -> None:
        if ev.previous == ToolCallState.APPROVAL_REQUIRED.value and ev.state != ev.previous:
            self.window.inbox.remove(ev.call_id)
        if ev.session_id != self.current_session:
            return
        self.window.timeline_model.set_state(ev.call_id, ev.state, ev.name, ev.session_id)
        self.window.conversation.update_tool_card(ev.call_id, ev.state)

    def _on_update(self, ev: ToolUpdate) -> None:
        if ev.session_id == self.current_session:
            self.window.timeline_model.append_output(ev.call_id, ev.text)

    def _on_end(self, ev: ToolEnd) -> None:
        if ev.session_id != self.current_session:
            return
        self.window.timeline_model.end(ev.call_id, ev.state, ev.outcome, ev.duration_ms)
        self.window.conversation.update_tool_card(ev.call_id, ev.state or "COMPLETED", ev.duration_ms)
        self.spawn(self._refresh_record(ev.call_id))

    async def _refresh_record(self, call_id: str) -> None:
        """The full record (exit code, result, trail, sandbox) for the timeline's details."""
        flush = getattr(self.store, "flush", None)
        if flush is not None:
            await flush()
        rec = await self.store.get_record(call_id)
        if rec is not None and rec.session_id == self.current_session:
            self.window.timeline_model.update_record(rec)

    def _on_tool_error(self, ev: ToolError) -> None:
        if ev.session_id == self.current_session:
            self.window.timeline_model.append_output(ev.call_id, f"\n[error] {ev.error}\n")

    def _on_permission_required(self, ev: PermissionRequired) -> None:
        item = PendingApproval.from_event(ev)
        s = self.sessions.get(ev.session_id)
        item.project_id = s.project_id if s else ""
        item.session_title = self._session_title(ev.session_id)
        self.window.inbox.add(item)

    def _on_permission_decided(self, ev: PermissionDecided) -> None:
        self.window.inbox.remove(ev.call_id)

    def _on_usage(self, ev: TokenUsage) -> None:
        self.window.status.add_usage(ev)
        if ev.model:
            self.window.status.set_model(ev.model)

    def _on_done(self, ev: Done) -> None:
        if ev.session_id != self.current_session:
            return
        conv = self.window.conversation
        conv.finish_message()
        if ev.reason == "interrupted":
            conv.add_notice("Interrupted.")
        elif ev.reason in ("error", "max_steps", "paused") and ev.message:
            conv.add_notice(f"{ev.reason}: {ev.message}", "#d9363e" if ev.reason == "error" else "#d4890b")

    def _on_error(self, ev: ErrorEvent) -> None:
        if ev.session_id and ev.session_id != self.current_session:
            return
        if ev.retrying:
            self.window.status.activity.setText(f"{ev.message} — retrying (attempt {ev.attempt})")
        else:
            self.window.conversation.add_notice(f"⚠ {ev.message}", "#d9363e")

    # windows and dialogs ---------------------------------------------------------------------------
    def open_history(self) -> Any:
        from ._history import HistoryWindow

        if self._history_window is None:
            self._history_window = HistoryWindow(self.store)
            model = self._history_window.model
            model.project_names = {p.id: p.name for p in self.window.projects_model.projects()}
            model.session_names = {sid: session_title(s) for sid, s in self.sessions.items()}
            self.history_loading = self.spawn(self._history_window.refresh())
        bring_to_front(self._history_window)
        return self._history_window

    async def edit_settings(self) -> Any:
        from ..config import clear_api_key, keyring_available, store_api_key
        from ._dialogs import SettingsDialog
        from ._theme import apply_theme

        loop = asyncio.get_running_loop()
        keyring_ok = await loop.run_in_executor(None, keyring_available)
        dlg = SettingsDialog(self.settings, key_source=self.api_key_source, keyring_ok=keyring_ok,
                             parent=self.window)
        result = await dlg.ask()
        dlg.deleteLater()
        if result is None:
            return None
        s = self.settings
        s.model, s.base_url, s.permission_mode, s.theme = (result.model, result.base_url,
                                                           result.permission_mode, result.theme)
        if result.clear_key:
            await loop.run_in_executor(None, clear_api_key, s)
            self.api_key_source = None
        if result.api_key:
            self.api_key_source = await loop.run_in_executor(None, store_api_key, s, result.api_key)
        if s.path is not None:
            await loop.run_in_executor(None, s.save)
        apply_theme(s.theme)
        self.window.status.set_model(s.model)
        self.check_api_key()
        self.agents.clear()  # new sessions pick up the new model and key
        forget = getattr(self.agent_factory, "forget_model", None)
        if forget is not None:
            forget()
        return result

    async def image_catalog(self) -> list[dict[str, Any]]:
        """The sandbox_images manifest with each image's build status (Docker is asked off the GUI thread;
        without Docker the catalog still lists what can be built)."""
        from .. import sandbox as sb

        loop = asyncio.get_running_loop()
        try:
            statuses = await loop.run_in_executor(None, sb.list_images)
            return [{"name": st.spec.name, "tag": st.spec.tag,
                     "description": st.spec.description or st.spec.label,
                     "status": "built" if st.present else "missing"} for st in statuses]
        except Exception as exc:  # no Docker: list the manifest, status unknown
            log.info("image status unavailable: %s", exc)
        try:
            specs = await loop.run_in_executor(None, sb.load_catalog)
        except Exception as exc:
            log.warning("image catalog unavailable: %s", exc)
            return []
        return [{"name": sp.name, "tag": sp.tag, "description": sp.description or sp.label,
                 "status": "unknown (Docker not available)"} for sp in specs.values()]

    async def _build_image(self, name: str, on_progress: Callable[[str], None]) -> Any:
        from .. import sandbox as sb

        loop = asyncio.get_running_loop()

        def progress(line: Any) -> None:  # called on the build thread: hop to the GUI thread
            loop.call_soon_threadsafe(on_progress, str(line))

        return await loop.run_in_executor(None, lambda: sb.build_image(name, on_progress=progress))

    async def edit_project(self, project_id: str | None) -> ProjectInfo | None:
        from ._dialogs import ProjectSettingsDialog, write_rules_file

        project = self.window.projects_model.project(project_id) if project_id else None
        catalog = await self.image_catalog()
        dlg = ProjectSettingsDialog(
            project, catalog=catalog, build_image=self._build_image,
            default_mode=getattr(self.settings, "permission_mode", "ask"),
            default_image=getattr(self.settings, "default_image", "agent-desk/minimal:latest"),
            parent=self.window)
        result = await dlg.ask()
        rules_text = getattr(dlg, "rules_text", "")
        dlg.deleteLater()
        if result is None:
            return None
        await asyncio.get_running_loop().run_in_executor(None, write_rules_file, result, rules_text)
        await self.store.save_project(result)
        self.window.projects_model.upsert_project(result)
        self.window.banner.clear_item("project")
        # A project's sandbox and policy are fixed when its sessions open: reopen them with the new ones.
        for sid, s in list(self.sessions.items()):
            if s.project_id == result.id and sid in self.agents and not self.agents[sid].running:
                del self.agents[sid]
        if project_id is None:
            await self.new_session(result.id)
        return result

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for agent in list(self.agents.values()):
            close = getattr(agent, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:
                    log.exception("closing a session failed")
        self.agents.clear()
        self.bridge.detach()
