"""Breakpoints in the window (core/_breakpoints.py does the stopping): the Breakpoints menu sets and clears them for
the session in view (before a tool, when a call needs approval, before the next write); a strip above the
conversation says which are set, and, when the session is PAUSED at one, the call it stopped with Resume and Deny."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QInputDialog, QMenu, QWidget
from shiboken6 import isValid

from ..core import AgentSession, AgentStateChanged, Allow, ApprovalScope, Deny, parse_breakpoint, summarize_input
from ..runtime import builtin_tools
from ._tasks import BackgroundTasks

if TYPE_CHECKING:
    from ._mainwindow import MainWindow
    from .inbox import PendingApproval

WRITE, APPROVAL = "@write", "@approval"  # core/_breakpoints.py's specs for the next write and for approval


def spec_words(spec: str) -> str:
    return {WRITE: "before the next write", APPROVAL: "when a call needs approval"}.get(spec, f"before {spec}")


def ask_tool(parent: QWidget, names: list[str]) -> asyncio.Future[str | None]:
    """Which tool (or group:NAME) to stop before, opened (never exec'd): the name, or None when cancelled."""
    dlg = QInputDialog(parent)
    dlg.setObjectName("AskBreakpointTool")
    dlg.setWindowTitle("Break before a tool")
    dlg.setLabelText("Stop the session before each call of:")
    dlg.setComboBoxItems(names)
    dlg.setComboBoxEditable(True)  # an MCP tool or a group:NAME too
    future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def done(result: int) -> None:
        if not future.done():
            ok = result == QInputDialog.DialogCode.Accepted
            future.set_result(dlg.textValue().strip() or None if ok else None)
        dlg.deleteLater()

    dlg.finished.connect(done)
    dlg.open()
    future.add_done_callback(lambda f: f.cancelled() and isValid(dlg) and dlg.reject())
    return future


class SessionBreakpoints(QObject):
    """Each session's breakpoints, applied to its agent when it opens and at once when it is open."""

    def __init__(self, window: MainWindow, agents: dict[str, AgentSession], current: Callable[[], str | None],
                 decide: Callable[[str, str, Any], Any], bridge: Any) -> None:
        super().__init__(window)
        self.window = window
        self.agents = agents  # the controller's open agents, by session id
        self.current = current
        self.decide = decide  # the controller's decide(call_id, session_id, decision), a coroutine
        self.tasks = BackgroundTasks()
        self.specs: dict[str, list[str]] = {}  # session -> breakpoints chosen (the agent's own once it is open)
        self.paused: dict[str, AgentStateChanged] = {}  # session -> the state that paused it at a breakpoint
        self.menu = self._build_menu()
        bridge.agentStateChanged.connect(self._on_state)
        window.inbox.countChanged.connect(lambda _n: self.show())

    # the menu --------------------------------------------------------------------------------------
    def _build_menu(self) -> QMenu:
        menu = QMenu("&Breakpoints", self.window)
        menu.setObjectName("BreakpointsMenu")
        self.tool_act = menu.addAction("Break before a tool…", lambda: self.tasks.spawn(self.ask_and_add()))
        self.approval_act = menu.addAction("Break when a call needs approval")
        self.write_act = menu.addAction("Break before the next write")
        for act, spec in ((self.approval_act, APPROVAL), (self.write_act, WRITE)):
            act.setCheckable(True)
            act.toggled.connect(lambda on, s=spec: self.set(s, on))
        menu.addSeparator()
        self.clear_act = menu.addAction("Clear all breakpoints", self.clear)
        menu.aboutToShow.connect(self._sync_menu)
        bar = self.window.menuBar()
        bar.insertMenu(self.window.help_menu.menuAction(), menu)
        return menu

    def _sync_menu(self) -> None:
        specs = self.of(self.current() or "")
        for act, spec in ((self.approval_act, APPROVAL), (self.write_act, WRITE)):
            act.blockSignals(True)
            act.setChecked(spec in specs)
            act.blockSignals(False)
        enabled = self.current() is not None
        for act in (self.tool_act, self.approval_act, self.write_act):
            act.setEnabled(enabled)
        self.clear_act.setEnabled(bool(specs))

    async def ask_and_add(self) -> str | None:
        names = sorted(t.name for t in builtin_tools())
        name = await ask_tool(self.window, names)
        if name:
            self.set(name, True)
        return name

    # the breakpoints -------------------------------------------------------------------------------
    def of(self, session_id: str) -> list[str]:
        """The session's breakpoints now: its open agent's (a one-shot met is gone), else the ones chosen."""
        if not self.specs.get(session_id):
            return []  # none set from this window
        agent = self.agents.get(session_id)
        if agent is not None:
            return [b.on for b in agent.breakpoints()]
        return list(self.specs.get(session_id, []))

    def set(self, spec: str, on: bool = True) -> list[str]:
        """Set (or clear) one breakpoint of the session in view; the engine parses it (a bad one is refused)."""
        sid = self.current()
        if sid is None:
            return []
        specs = [s for s in self.of(sid) if s != spec] + ([spec] if on else [])
        return self._apply(sid, specs)

    def clear(self) -> list[str]:
        sid = self.current()
        return self._apply(sid, []) if sid is not None else []

    def _apply(self, session_id: str, specs: list[str]) -> list[str]:
        agent = self.agents.get(session_id)
        if agent is not None:
            specs = [b.on for b in agent.set_breakpoints(specs)]  # a ConfigError names a bad spec
        else:
            specs = [parse_breakpoint(s).on for s in specs]
        self.specs[session_id] = specs
        self.show()
        return specs

    def opened(self, session_id: str, agent: AgentSession) -> None:
        """A session's agent opened: the breakpoints chosen before apply from its first call."""
        if self.specs.get(session_id):
            agent.set_breakpoints(self.specs[session_id])

    # PAUSED at a breakpoint ------------------------------------------------------------------------
    def _on_state(self, ev: AgentStateChanged) -> None:
        if ev.state == "PAUSED" and ev.reason == "breakpoint":
            self.paused[ev.session_id] = ev
        else:
            self.paused.pop(ev.session_id, None)
        if ev.session_id == self.current():
            self.show()

    def waiting_call(self, session_id: str) -> PendingApproval | None:
        """The call the session stopped at: the inbox's card of it (a breakpoint's call asks like any other)."""
        return next((i for i in self.window.inbox.model.items()
                     if i.session_id == session_id and i.meta.get("breakpoint")), None)

    def show(self) -> None:
        """The strip for the session in view: the breakpoints set, and the call it is paused at."""
        banner, sid = self.window.approval_banner, self.current() or ""
        specs = self.of(sid) if sid else []
        if specs:
            words = " · ".join(html.escape(spec_words(s)) for s in specs)
            banner.set_item("breakpoints", f"● Breakpoints in this session: {words}", [("Clear", self.clear)])
        else:
            banner.clear_item("breakpoints")
        item = self.waiting_call(sid) if sid in self.paused else None
        if item is None:
            banner.clear_item("breakpoint-hit")
            return
        what = html.escape(summarize_input(item.input) or "")
        at = html.escape(spec_words(str(item.meta.get("breakpoint"))))
        banner.set_item("breakpoint-hit", f"<b>PAUSED</b> at a breakpoint ({at}): <b>{html.escape(item.name)}</b> "
                        f"{what}", [("Resume", lambda: self.tasks.spawn(self.resume())),
                                    ("Deny", lambda: self.tasks.spawn(self.resume(deny=True)))])

    async def resume(self, *, deny: bool = False) -> str | None:
        """The person's word at the breakpoint: the waiting call goes on (or is denied) and the session resumes."""
        sid = self.current()
        item = self.waiting_call(sid) if sid else None
        if item is None:
            return None
        decision = (Deny(note="denied at a breakpoint") if deny
                    else Allow(ApprovalScope.ONCE, note="resumed at a breakpoint"))
        self.window.approval_banner.clear_item("breakpoint-hit")
        await self.decide(item.call_id, item.session_id, decision)
        return item.call_id
