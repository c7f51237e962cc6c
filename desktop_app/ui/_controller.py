"""AppController: sessions, send, stop and the approval round trip. The views follow the event bridge
themselves (their `attach`); this turns what the person does into engine calls, on the qasync loop."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut

from ..core import (
    AgentDeskError,
    AgentSession,
    Answer,
    ApprovalDecision,
    Channel,
    ConsentKind,
    Envelope,
    McpServerInfo,
    ProjectInfo,
    PromptImage,
    SessionInfo,
    StoredMessage,
    TokenUsage,
    ToolCallRecord,
    ToolCallState,
    ToolUpdate,
    TurnResult,
    check_prompt_images,
    history_image_sizes,
    image_block,
    new_id,
    project_rules_path,
    title_from,
)
from . import dialogs
from ._breakpoints import SessionBreakpoints
from ._bridge import EventBridge
from ._builds import image_builds
from ._checks import SetupChecks
from ._consent_banner import ConsentBanner
from ._conversation import NOTICE_EVENTS
from ._mainwindow import SHORTCUTS, MainWindow
from ._mcp import McpDirectory
from ._projects import ask_text, session_title
from ._quit import QuitFlow, RunningCalls
from ._rewind_files import RewindFiles
from ._session_modes import SessionModes
from ._tasks import BackgroundTasks
from ._theme import apply_theme, bring_to_front
from .inbox import PendingApproval

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMessageBox

    from ..runtime import Consent, Desk
    from .history import HistoryWindow

log = logging.getLogger(__name__)


class AppController(QObject):
    sessionChanged = Signal(str)
    turnFinished = Signal(str, object)  # session id, TurnResult or exception

    def __init__(self, window: MainWindow, desk: Desk) -> None:
        super().__init__(window)
        self.window = window
        self.desk = desk
        self.bridge = EventBridge(desk.bus, self)
        self.mcp = McpDirectory(self)  # each project's MCP servers, as last reported
        self.mcp.attach(self.bridge)
        self.current_session: str | None = None
        self.agents: dict[str, AgentSession] = {}  # session id -> open AgentSession
        self.sessions: dict[str, SessionInfo] = {}
        self.modes = SessionModes(window, desk, self.agents, lambda: self.current_session, self._project_of_session,
                                  lambda sid: self.sessions.get(sid))
        self.tasks = BackgroundTasks(self._report)
        self.checks = SetupChecks(
            window, current_project=self._current_project, open_history=self.open_history,
            set_key=lambda: self.tasks.spawn(self.edit_settings()),
            retry_docker=lambda: self.tasks.spawn(self.checks.check_docker()),
            run_checks=lambda: self.tasks.spawn(self.run_setup_checks()),
            edit_project=lambda pid: self.tasks.spawn(self.edit_project(pid)), save_project=self._image_built)
        self.db_url: str | None = None  # the database the window uses (what the setup checks verify)
        self.checks_dialog: dialogs.ChecksDialog | None = None
        self._history_window: HistoryWindow | None = None
        self.history_loading: asyncio.Task | None = None
        self.consent = ConsentBanner(window, self.tasks.spawn, applied=self._consent_applied)
        self.running_calls = RunningCalls(self)
        self.quit = QuitFlow(window, self.agents, self.running_calls)  # quit_guard, and the question at a close
        self.rewind = RewindFiles(window, desk, self.tasks.spawn, self)  # a row's "Rewind files…", a turn's "Rewind…"
        self.running_calls.attach(self.bridge)
        self.breakpoints = SessionBreakpoints(window, self.agents, lambda: self.current_session, self.decide,
                                              self.bridge)  # the Breakpoints menu, and Resume at one
        self._attach_views()
        self._connect()

    def _report(self, exc: BaseException) -> None:
        """A background task failed: say so in the conversation (and log what is not ours)."""
        msg = exc.user_message() if isinstance(exc, AgentDeskError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, AgentDeskError):
            log.error("background task failed", exc_info=exc)
        self.window.conversation.add_notice(f"⚠ {msg}", "#d9363e")
        self.checks.after_error(exc)  # a sandbox's failure: checked again, its fix offered as a button

    def _attach_views(self) -> None:
        w, b = self.window, self.bridge

        def current() -> str | None:
            return self.current_session

        w.timeline_model.attach(b, current, load_record=self._load_record)
        w.conversation.attach(b, current)
        w.status.attach(b, current)
        w.inbox.attach(b, lambda sid: self.sessions.get(sid))
        w.inbox.mcp_names = self.mcp.call_name
        w.timeline_model.mcp_names = self.mcp.call_name
        w.inbox.rules_target = self._rules_target
        w.inbox.preview_provider = self._preview_diff
        w.projects_model.attach_agent_states(b)
        w.timeline_model.attach_host_changes(b, current)

    def _connect(self) -> None:
        w, spawn = self.window, self.tasks.spawn
        w.promptSubmitted.connect(lambda text: spawn(self.send(text, w.attachments.take())))
        w.stopRequested.connect(self.stop)
        w.inbox.decided.connect(lambda cid, sid, decision: spawn(self.decide(cid, sid, decision)))
        w.inbox.questions.answered.connect(lambda qid, sid, answer: spawn(self.answer_question(qid, sid, answer)))
        w.sidebar.sessionActivated.connect(lambda sid: spawn(self.select_session(sid)))
        w.sidebar.newSessionRequested.connect(lambda pid: spawn(self.new_session(pid)))
        w.sidebar.newProjectRequested.connect(lambda: spawn(self.edit_project(None)))
        w.sidebar.projectSettingsRequested.connect(lambda pid: spawn(self.edit_project(pid)))
        w.settingsRequested.connect(lambda: spawn(self.edit_settings()))
        w.historyRequested.connect(self.open_history)
        w.checksRequested.connect(lambda: spawn(self.run_setup_checks()))
        w.aboutRequested.connect(self.show_about)
        w.compactRequested.connect(lambda: spawn(self.compact()))
        w.quitRequested.connect(lambda: spawn(self.quit.request()))
        w.conversation.retryRequested.connect(lambda: spawn(self.retry()))
        w.shortcutsRequested.connect(self.show_shortcuts)
        w.mode_picker.modeChosen.connect(self.modes.set_mode)
        self.bridge.questionAnswered.connect(self.modes.plan_answered)
        w.sidebar.renameRequested.connect(lambda sid: spawn(self.rename_session(sid)))

    # start-up --------------------------------------------------------------------------------------
    async def start(self, *, check_docker: bool = True) -> None:
        """Fill the sidebar, restore the inbox, say what is missing; Docker is probed in the background."""
        self.window.status.set_model(self.desk.settings.model or "–")
        self._show_sources()
        self.checks.check_api_key(self.desk.api_key_source)
        if check_docker:
            self.window.status.set_sandbox("checking…")
            self.tasks.spawn(self.checks.check_docker())
            self.tasks.spawn(self.desk.sweep_orphans())  # the containers a crash left (none another desk uses)
        await self.reload_projects()
        interrupted = await self.seal_abandoned()
        await self.restore_approvals()
        if self.current_session is None:
            first = next(iter(sorted((s for s in self.sessions.values() if not s.meta.get("parent_session_id")),
                                     key=lambda s: -s.updated_at)), None)
            first = self._top_session(interrupted[0]) if interrupted else first  # what a crash cut short first
            if first is not None:
                self.window.sidebar.select_session(first.id)
                await self.select_session(first.id)

    def _show_sources(self) -> None:
        s = self.desk.settings
        self.window.status.set_sources(self.desk.api_key_source, s.base_url_source(), s.resolved_base_url())

    async def reload_projects(self) -> None:
        projects = await self.desk.store.list_projects()
        sessions = await self.desk.store.list_sessions()
        self.sessions = {s.id: s for s in sessions}
        # a sub-agent's session is shown under its parent's call in the timeline, not in the sidebar
        self.window.projects_model.set_data(projects, [s for s in sessions if not s.meta.get("parent_session_id")])
        if not projects:
            self.window.banner.set_item(
                "project", "No project yet: add a folder the agent may work in.",
                [("Add project…", lambda: self.tasks.spawn(self.edit_project(None)))])
        else:
            self.window.banner.clear_item("project")

    async def seal_abandoned(self) -> list[str]:
        """Calls left running by a process that is gone are sealed now, each session told what was running:
        nobody should see "running" for a call that no process runs. The sessions they were in, latest first."""
        return await self.desk.seal_abandoned()

    def _top_session(self, session_id: str) -> SessionInfo | None:
        """The session the sidebar lists for `session_id`: itself, or the top session a sub-agent ran under."""
        session, seen = self.sessions.get(session_id), set()
        while session is not None and session.meta.get("parent_session_id") and session.id not in seen:
            seen.add(session.id)
            parent = self.sessions.get(str(session.meta["parent_session_id"]))
            if parent is None:
                break
            session = parent
        return session

    async def restore_approvals(self) -> None:
        """Calls still waiting from an earlier run of the app: shown now, answered once the session reopens."""
        self.window.inbox.restore(await self.desk.pending_approvals())

    # a folder handed over (agent-desk PATH) -------------------------------------------------------------
    async def open_folder(self, folder: str) -> ProjectInfo:
        """Show `folder`'s project (made on first use): its latest session, or a new one."""
        project = await self.desk.project_for_dir(folder)
        self.window.projects_model.upsert_project(project)
        self.window.banner.clear_item("project")
        latest = max((s for s in self.sessions.values() if s.project_id == project.id),
                     key=lambda s: s.updated_at, default=None)
        if latest is None:
            await self.new_session(project.id)
        else:
            self.window.sidebar.select_session(latest.id)
            await self.select_session(latest.id)
        bring_to_front(self.window)
        return project

    def handle_instance_message(self, message: dict[str, str]) -> str:
        """A later `agent-desk` of this user: {"open": "/abs/folder"}, {"raise": …} or {"ping": …}. The folder
        is checked here too (the sender is trusted only as far as being this user)."""
        folder = message.get("open")
        if folder is None:
            if "raise" in message:
                bring_to_front(self.window)
            return "ok"
        if len(folder) > 4096 or "\0" in folder or not os.path.isabs(folder) or not os.path.isdir(folder):
            return "error: not an absolute path to a folder"
        self.tasks.spawn(self.open_folder(folder))
        return "ok"

    # sessions --------------------------------------------------------------------------------------
    async def select_session(self, session_id: str) -> None:
        if session_id == self.current_session:
            return
        self.current_session = session_id
        w = self.window
        w.timeline_model.clear()  # and with it the details, which were the previous session's
        w.conversation.clear_conversation()
        session = self.sessions.get(session_id) or await self.desk.store.get_session(session_id)
        project = w.projects_model.project(session.project_id) if session else None
        self._show_title(session)
        await self.desk.store.flush()  # what this process published last (a notice, a sealed call) is read back
        records, messages, monitor, notices, streamed = await asyncio.gather(
            self._records_with_children(session_id),  # a call's trail is read when it is opened
            self.desk.store.messages(session_id),
            # a session from an earlier run: its token count is in the persisted monitor events
            self.desk.store.events_since(0, [Channel.MONITOR], session_id=session_id, types=[TokenUsage.type])
            if not w.status.has_usage(session_id) else asyncio.sleep(0, []),
            self.desk.store.events_since(0, list(Channel), session_id=session_id, types=list(NOTICE_EVENTS)),
            self.desk.store.events_since(0, [Channel.PROGRESS], session_id=session_id, types=[ToolUpdate.type]),
        )
        if self.current_session != session_id:
            return
        self._show_session(session_id, records, messages, monitor, notices)
        self._restore_output(records, streamed)
        w.mode_picker.set_mode(self.mode_of(session_id))
        self._show_sandbox_of(session_id, project)
        if project is not None:
            # before the first message: the project's rules, hooks and servers waiting for approval are shown
            self.tasks.spawn(self.consent.check(project))
        self.breakpoints.show()
        self.sessionChanged.emit(session_id)

    def _restore_output(self, records: list[ToolCallRecord], streamed: list[Envelope]) -> None:
        """The output a call streamed (stored as it came), back in its details after a restart, for the calls
        whose result does not hold it: those that failed, were interrupted or sealed after a crash."""
        cut_short = {r.id for r in records if r.terminal and r.state is not ToolCallState.COMPLETED}
        model = self.window.timeline_model
        for env in streamed:
            call_id = str(env.payload.get("call_id") or "")
            if call_id in cut_short:
                model.append_output(call_id, str(env.payload.get("text") or ""))

    def _show_title(self, session: SessionInfo | None) -> None:
        project = self.window.projects_model.project(session.project_id) if session else None
        self.window.session_label.setText(
            f"{project.name if project else ''} › {session_title(session)}" if session else "")

    def _show_sandbox_of(self, session_id: str, project: ProjectInfo | None) -> None:
        """The status bar follows the project in view: its open sandbox, or what it will use."""
        agent = self.agents.get(session_id) or next(
            (a for sid, a in self.agents.items() if project and self.sessions.get(sid)
             and self.sessions[sid].project_id == project.id), None)
        if agent is not None:
            self.checks.show_sandbox(agent)
        elif project is not None:
            self.checks.show_project_sandbox(project)

    async def _records_with_children(self, session_id: str) -> list[ToolCallRecord]:
        """The session's calls and its sub-agents' (each child linked in the timeline under its parent call)."""
        records = list(await self.desk.store.session_records(session_id, trails=False))
        children = [s for s in await self.desk.store.list_sessions() if s.meta.get("parent_session_id")]
        todo, seen = [session_id], {session_id}
        while todo:
            parent = todo.pop()
            for child in (c for c in children if c.meta["parent_session_id"] == parent and c.id not in seen):
                seen.add(child.id)
                todo.append(child.id)
                self.window.timeline_model.link_child(child.id, str(child.meta.get("parent_call_id") or ""))
                records += await self.desk.store.session_records(child.id, trails=False)
        return records

    async def _root_session(self, session_id: str) -> str:
        """The top session a sub-agent's session belongs to (its agent holds the project's executor)."""
        for _ in range(16):
            s = self.sessions.get(session_id) or await self.desk.store.get_session(session_id)
            parent = s.meta.get("parent_session_id") if s is not None else None
            if not parent:
                break
            session_id = str(parent)
        return session_id

    def _show_session(self, session_id: str, records: list[ToolCallRecord], messages: list[StoredMessage],
                      monitor: list[Envelope], notices: list[Envelope]) -> None:
        w = self.window
        if not w.status.has_usage(session_id):
            for env in monitor:
                if env.type == TokenUsage.type:
                    w.status.add_usage(env.event)
        records.sort(key=lambda r: (r.created_at, r.batch_index))
        w.timeline_model.add_records(records)
        w.conversation.load_messages(messages, records, notices)
        agent = self.agents.get(session_id)
        w.set_running(bool(agent and agent.running))
        w.status.show_session(session_id)

    def _project_of_session(self, session_id: str) -> ProjectInfo | None:
        session = self.sessions.get(session_id)
        return self.window.projects_model.project(session.project_id) if session else None

    def _current_project(self) -> ProjectInfo | None:
        session = self.sessions.get(self.current_session or "")
        return self.window.projects_model.project(session.project_id) if session else None

    async def new_session(self, project_id: str, title: str = "") -> SessionInfo:
        session = SessionInfo(id=new_id("ses_"), project_id=project_id, title=title,
                              model=self.desk.settings.model)
        await self.desk.store.save_session(session)
        self.sessions[session.id] = session
        self.window.projects_model.upsert_session(session)
        self.window.sidebar.select_session(session.id)
        await self.select_session(session.id)
        self.window.prompt.setFocus()  # a new session is for typing into
        return session

    async def agent_for(self, session_id: str) -> AgentSession:
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent
        session = self.sessions.get(session_id) or await self.desk.store.get_session(session_id)
        project = self.window.projects_model.project(session.project_id) if session else None
        if project is None:
            raise AgentDeskError("Pick a project (or add one) before sending a message.")
        agent = await self.desk.open_session(project, session_id)
        self.agents[session_id] = agent
        self.modes.opened(session_id, agent)
        self.breakpoints.opened(session_id, agent)
        current = self.sessions.get(self.current_session or "")
        if current is not None and current.project_id == project.id:  # the status bar shows the project in view
            self.checks.show_sandbox(agent)
        notice = self.consent.notice_for(project)
        if notice and session_id == self.current_session:
            self.window.conversation.add_notice(f"⚠ {notice}", "#d4890b")
        return agent

    def mode_of(self, session_id: str) -> str:
        """The mode the session's next call is judged in (see SessionModes)."""
        return self.modes.mode_of(session_id)

    async def send(self, text: str, images: list[PromptImage] | None = None) -> TurnResult | None:
        """Send `text` (and `images`) in the current session. It is stored before anything can fail on the way
        (the sandbox starting, the model): a message the model never got is still there after a restart. A send
        refused before that puts the text and the images back in the prompt box."""
        images = images or []
        try:
            sid, agent = await self._accept(text, images)
        except BaseException:
            if not self.window.prompt.toPlainText().strip():
                self.window.prompt.setPlainText(text)
            self.window.attachments.restore(images)
            raise
        if agent is not None:
            return await self._run_turn(sid, text, agent, images)
        return await self._run_turn(sid, None)

    async def _accept(self, text: str, images: list[PromptImage] | None = None) -> tuple[str, AgentSession | None]:
        """The session (made from the first prompt when there is none), its title, and the message stored
        unless a running turn takes it (it is stored at that turn's next step). Returns the running agent
        that queues the text, or None when the text is stored and a turn must start from it."""
        w = self.window
        sid = self.current_session  # the session in view when Enter was pressed, whatever is clicked next
        # the configured key and the secret patterns, as the agent stores messages: the title too is stored
        redacted = await asyncio.to_thread(self.desk.bus.redactor.redact, text)
        if sid is None:
            pid = w.sidebar.current_project_id() or (w.projects_model.projects()[0].id
                                                     if w.projects_model.projects() else None)
            if pid is None:
                raise AgentDeskError("Add a project first.", hint="File › New project…, or + Project in the sidebar.")
            sid = (await self.new_session(pid, title=title_from(redacted))).id
        session = self.sessions.get(sid)
        if session is not None and not session.title:
            await self.set_title(sid, title_from(redacted))
        agent = self.agents.get(sid)
        running = agent is not None and agent.running
        if images and not running:  # a running agent checks them against its history itself
            earlier = await asyncio.to_thread(history_image_sizes, await self.desk.store.messages(sid))
            check_prompt_images(images, earlier)
        if self.current_session == sid:
            w.conversation.add_user_message(text, images)
        if running:
            return sid, agent
        content = [image_block(i) for i in images or ()] + ([{"type": "text", "text": redacted}] if text else [])
        await self.desk.store.append_message(StoredMessage(session_id=sid, role="user", content=content))
        return sid, None

    async def _run_turn(self, sid: str, queued: str | None, agent: AgentSession | None = None,
                        images: list[PromptImage] | None = None) -> TurnResult | None:
        """A turn of `sid`: `queued` joins the running one; else the stored history is run (`retry`)."""
        w = self.window
        if self.current_session == sid:
            w.set_running(True)
        try:
            agent = agent or await self.agent_for(sid)
            result = await (agent.send(queued, images or ()) if queued is not None else agent.retry())
        except Exception as exc:
            self.turnFinished.emit(sid, exc)
            if self.current_session == sid and not isinstance(exc, asyncio.CancelledError):
                w.conversation.show_error(exc.user_message() if isinstance(exc, AgentDeskError) else str(exc))
                w.conversation.offer_retry()
            log.info("the turn of %s failed: %s", sid, exc, exc_info=not isinstance(exc, AgentDeskError))
            return None
        finally:
            if self.current_session == sid:
                w.set_running(bool(agent is not None and agent.running))
                w.conversation.finish_message()
        self.turnFinished.emit(sid, result)
        return result

    async def retry(self) -> TurnResult | None:
        """The error line's Retry: the same step again, from the stored history (opening the session's
        agent again if that is what failed). A turn already running is not started twice."""
        sid = self.current_session
        if sid is None:
            return None
        agent = self.agents.get(sid)
        if agent is not None and agent.running:
            return None
        return await self._run_turn(sid, None)

    def stop(self) -> None:
        agent = self.agents.get(self.current_session or "")
        if agent is not None and agent.running:
            agent.stop()
            self.window.conversation.add_notice("Stopping…")

    async def compact(self) -> bool:
        """Compact the current session by hand: its older turns summarised by the model (a notice follows
        from the Compacted event); False when there is nothing older than the last turn."""
        sid = self.current_session
        if sid is None:
            raise AgentDeskError("Open a session to compact it.", hint="Pick a session in the sidebar.")
        agent = await self.agent_for(sid)
        self.window.conversation.add_notice("Compacting the conversation…")
        done = await agent.compact()
        if not done and self.current_session == sid:
            self.window.conversation.add_notice("Nothing to compact yet: the conversation has a single turn.")
        return done

    async def _load_record(self, call_id: str) -> ToolCallRecord | None:
        """The full record (exit code, result, trail, sandbox) for the timeline's details."""
        await self.desk.store.flush()
        return await self.desk.store.get_record(call_id)

    # approvals -------------------------------------------------------------------------------------
    async def decide(self, call_id: str, session_id: str, decision: ApprovalDecision) -> None:
        """Hand the person's answer to the executor its session waits on. Once it is handed over the card
        goes, whatever `decide` does: a call no longer waiting (expired, answered elsewhere) must not
        stay on screen; a failure is shown as a notice by the task reporter."""
        # a sub-agent's call waits on the executor its top session shares (never a second agent for the child)
        agent = await self.agent_for(await self._root_session(session_id))  # one that cannot open keeps its card
        try:
            self.desk.decide(agent, call_id, decision)
        finally:
            self.window.inbox.remove(call_id)

    async def answer_question(self, question_id: str, session_id: str, answer: Answer) -> None:
        """Hand the person's answer to a question or plan to the executor its session waits on."""
        agent = await self.agent_for(session_id)
        self.desk.answer(agent, question_id, answer)

    def _rules_target(self, item: PendingApproval) -> str:
        s = self.sessions.get(item.session_id)
        project = self.window.projects_model.project(s.project_id) if s else None
        return str(project_rules_path(project.path)) if project else ".agent-desk/rules.toml"

    async def _preview_diff(self, item: PendingApproval) -> str | None:
        agent = self.agents.get(await self._root_session(item.session_id))
        return await self.desk.preview_diff(agent, item.name, item.input) if agent is not None else None

    # windows and dialogs ---------------------------------------------------------------------------
    def open_history(self) -> HistoryWindow:
        from .history import HistoryWindow

        if self._history_window is None:
            self._history_window = HistoryWindow(self.desk.store)
            close = QShortcut(QKeySequence(Qt.Key.Key_Escape), self._history_window, self._history_window.close)
            close.setContext(Qt.ShortcutContext.WindowShortcut)  # Esc closes it, as a dialog
            model = self._history_window.model
            model.project_names = {p.id: p.name for p in self.window.projects_model.projects()}
            model.session_names = {sid: session_title(s) for sid, s in self.sessions.items()}
            self.history_loading = self.tasks.spawn(self._history_window.refresh())
            # a window of the main one: the window manager keeps it above, so a second Ctrl+H shows it
            self._history_window.setParent(self.window, Qt.WindowType.Window)
        win = self._history_window
        if win.isMinimized():
            win.showNormal()
        bring_to_front(win)  # raised and active: typing goes to its search field, never to the agent's prompt
        win.text.setFocus()
        return win

    def show_about(self) -> dialogs.AboutDialog:
        dlg = dialogs.AboutDialog(parent=self.window)
        dlg.finished.connect(dlg.deleteLater)
        dlg.open()
        return dlg

    async def run_setup_checks(self) -> list[Any]:
        """The doctor's checks (Docker, images, key, endpoint, keyring, Qt, database) in a dialog; they run on
        worker threads, so the window stays live. One dialog, run again when asked again."""
        if self.checks_dialog is None:
            self.checks_dialog = dialogs.ChecksDialog(self.db_url, parent=self.window)
            self.checks_dialog.again.clicked.connect(lambda: self.tasks.spawn(self.checks_dialog.run()))
        bring_to_front(self.checks_dialog)
        return await self.checks_dialog.run()

    async def edit_settings(self) -> dialogs.SettingsResult | None:
        try:
            saved = await dialogs.edit_settings(self.desk.settings, self.desk.api_key_source, parent=self.window)
        finally:
            self.window.prompt.setFocus()  # back to the prompt, not the first field of the sidebar
        if saved is None:
            return None
        result, self.desk.api_key_source = saved
        apply_theme(self.desk.settings.theme)
        self.window.status.set_model(self.desk.settings.model)
        self._show_sources()
        self.checks.check_api_key(self.desk.api_key_source)
        self.agents.clear()  # new sessions pick up the new model and key
        self.desk.forget_model()
        return result

    async def mcp_servers(self, project_id: str) -> list[McpServerInfo] | None:
        """The project's MCP servers: its open runtime's list (`ProjectRuntime.mcp_servers()`), else the last
        McpServersChanged seen; None when neither (no session of it opened yet)."""
        try:
            servers = self.desk.mcp_servers(project_id)
        except Exception:  # the last report still shows; the engine logs its own failure
            log.exception("listing the MCP servers of %s failed", project_id)
        else:
            if servers is not None:
                self.mcp.set_servers(project_id, servers)
                return servers
        return self.mcp.servers(project_id)

    async def edit_project(self, project_id: str | None) -> ProjectInfo | None:
        project = self.window.projects_model.project(project_id) if project_id else None
        servers = await self.mcp_servers(project_id) if project_id else None
        result = await dialogs.edit_project(project, self.desk.settings, parent=self.window,
                                            mcp_servers=servers, bridge=self.bridge)
        if result is None:
            return None
        await self.desk.store.save_project(result)
        self.window.projects_model.upsert_project(result)
        self.window.banner.clear_item("project")
        self.checks.show_project_sandbox(result)  # saved: its engine, folder and image checked again
        self._reopen_idle(result.id)  # a project's sandbox and policy are fixed when its sessions open
        if project_id is None:
            await self.new_session(result.id)
        else:
            await self.desk.reload_rules(result)  # rules edited in the dialog apply from the next call
            await self.consent.check(result)
        return result

    async def _image_built(self, project: ProjectInfo) -> None:
        """The project's own image was built on a click: stored as its image; idle sessions reopen with it."""
        await self.desk.store.save_project(project)
        self.window.projects_model.upsert_project(project)
        self._reopen_idle(project.id)

    def _reopen_idle(self, project_id: str) -> None:
        """The project's idle sessions open again with their next message, on a runtime built anew (its sandbox,
        policy, hooks and MCP servers as they are now); a running one keeps its runtime until it ends."""
        for sid, s in list(self.sessions.items()):
            if s.project_id == project_id and sid in self.agents and not self.agents[sid].running:
                del self.agents[sid]

    async def _consent_applied(self, project: ProjectInfo, consent: Consent, settings: dict[str, Any]) -> None:
        """An approval from the banner: settings an approval moved out of are saved; the rules reach the open
        runtime now, hooks and MCP servers the sessions that open next."""
        if settings != project.settings:
            project.settings = settings
            await self.desk.store.save_project(project)
            self.window.projects_model.upsert_project(project)
        if consent.kind is ConsentKind.RULES:
            await self.desk.reload_rules(project)
        else:
            self._reopen_idle(project.id)
    # titles ----------------------------------------------------------------------------------------
    async def set_title(self, session_id: str, title: str) -> SessionInfo | None:
        """Store a session's title (read fresh: what another part of the desk wrote to it is kept); the
        sidebar and the header follow."""
        session = await self.desk.store.get_session(session_id) or self.sessions.get(session_id)
        if session is None:
            return None
        session.title = title
        await self.desk.store.save_session(session)
        self.sessions[session_id] = session
        self.window.projects_model.upsert_session(session)
        if session_id == self.current_session:
            self._show_title(session)
        return session

    async def rename_session(self, session_id: str) -> SessionInfo | None:
        """Rename from the sidebar (its menu, or F2): a blank name keeps the old one."""
        session = self.sessions.get(session_id)
        if session is None:
            return None
        name = await ask_text(self.window, "Rename session", "Session name:", session_title(session))
        if name is None or not name.strip():
            return None
        return await self.set_title(session_id, title_from(" ".join(name.split()), limit=120))

    async def close(self) -> None:
        """The window is going: UI tasks are cancelled, each turn still running is abandoned where it stands
        (its open calls are sealed at the next start), then the views stop following the bus."""
        self.tasks.cancel()
        image_builds().cancel_all()  # a build never holds the quit: the engine stops it, nothing is tagged
        for sid, agent in list(self.agents.items()):
            try:
                await agent.abandon()
                agent.close()
            except Exception:
                log.exception("closing a session failed")
            try:
                await self.desk.mark_closed_here(sid)
            except Exception:  # the store may be the part that failed: the next start finds out
                log.exception("marking session %s closed failed", sid)
        self.agents.clear()
        self.bridge.detach()

    def show_shortcuts(self) -> QMessageBox:
        from PySide6.QtWidgets import QMessageBox

        rows = "".join(f"<tr><td><b>{keys}</b></td><td>&nbsp;&nbsp;{what}</td></tr>" for keys, what in SHORTCUTS)
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", f"<table>{rows}</table>",
                          parent=self.window)
        box.setObjectName("ShortcutsDialog")
        box.finished.connect(box.deleteLater)
        box.open()
        return box

