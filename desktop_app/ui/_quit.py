"""Quitting with work in flight: what still runs or waits (from the bridge), and the question put to the
person before the window goes: wait, stop the running calls, or quit anyway."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox, QWidget
from shiboken6 import isValid

from ..core import StateChanged, ToolCallState, ToolEnd, ToolStart, summarize_input
from ._bridge import EventBridge
from ._theme import bring_to_front

if TYPE_CHECKING:
    from ..core import AgentSession
    from ._mainwindow import MainWindow


class QuitChoice(Enum):
    WAIT = "wait"  # keep the window open; nothing is touched
    STOP = "stop"  # stop every running turn (its calls end as interrupted, recorded now), then quit
    QUIT = "quit"  # quit now: running calls are cut off and sealed at the next start; approvals come back


@dataclass
class WorkInFlight:
    """What quitting now would cut short."""

    calls: list[str] = field(default_factory=list)  # "bash_run sleep 60", one per running call
    approvals: int = 0
    turns: int = 0  # turns still going (a reply streaming, or calls between steps)

    def __bool__(self) -> bool:
        return bool(self.calls or self.approvals or self.turns)

    def lines(self) -> list[str]:
        out = [f"running: {c}" for c in self.calls[:5]]
        if len(self.calls) > 5:
            out.append(f"and {len(self.calls) - 5} more running")
        if self.approvals:
            out.append(f"{self.approvals} approval{'s' if self.approvals != 1 else ''} waiting for you")
        if self.turns and not self.calls:
            out.append(f"{self.turns} repl{'ies' if self.turns != 1 else 'y'} from the model still coming")
        return out


class RunningCalls(QObject):
    """The calls executing now, in every session, as the bridge reports them."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._inputs: dict[str, str] = {}  # call id -> "name summary", from its ToolStart
        self.running: dict[str, str] = {}  # call id -> "name summary"

    def attach(self, bridge: EventBridge) -> None:
        bridge.toolStarted.connect(self._on_start)
        bridge.stateChanged.connect(self._on_state)
        bridge.toolEnded.connect(self._on_end)

    def _on_start(self, ev: ToolStart) -> None:
        if not ev.partial:
            self._inputs[ev.call_id] = f"{ev.name} {summarize_input(ev.input, 60)}".strip()

    def _on_state(self, ev: StateChanged) -> None:
        if ev.state == ToolCallState.EXECUTING.value:
            self.running[ev.call_id] = self._inputs.get(ev.call_id, ev.name)
        elif ev.state in {s.value for s in ToolCallState if s.terminal}:
            self._forget(ev.call_id)

    def _on_end(self, ev: ToolEnd) -> None:
        self._forget(ev.call_id)

    def _forget(self, call_id: str) -> None:
        self.running.pop(call_id, None)
        self._inputs.pop(call_id, None)


def ask_to_quit(parent: QWidget, work: WorkInFlight) -> asyncio.Future[QuitChoice]:
    """The question, opened (never exec'd); Esc and closing the box mean Wait."""
    box = QMessageBox(QMessageBox.Icon.Warning, "Quit Agent Desk?",
                      "Work is still in flight. Quitting now cuts it short.", parent=parent)
    box.setObjectName("QuitDialog")
    box.setInformativeText("\n".join(work.lines()))
    wait = box.addButton("Wait", QMessageBox.ButtonRole.RejectRole)
    stop = box.addButton("Stop running calls and quit", QMessageBox.ButtonRole.DestructiveRole)
    quit_ = box.addButton("Quit anyway", QMessageBox.ButtonRole.AcceptRole)
    wait.setToolTip("Keep the window open; nothing is stopped")
    stop.setToolTip("Stop every running turn (its calls end as interrupted, in the audit log), then quit")
    quit_.setToolTip("Quit now: running calls are cut off and marked interrupted at the next start; "
                     "approvals waiting are offered again")
    box.setDefaultButton(wait)
    box.setEscapeButton(wait)
    choices = ((wait, QuitChoice.WAIT), (stop, QuitChoice.STOP), (quit_, QuitChoice.QUIT))
    future: asyncio.Future[QuitChoice] = asyncio.get_running_loop().create_future()

    def done(_result: int) -> None:
        clicked = box.clickedButton()
        if not future.done():
            future.set_result(next((c for b, c in choices if b == clicked), QuitChoice.WAIT))
        box.deleteLater()

    box.finished.connect(done)
    box.open()
    future.add_done_callback(lambda f: f.cancelled() and isValid(box) and box.close())
    return future


class QuitFlow:
    """A close with work in flight: `guard` (MainWindow.closeEvent asks it) holds the close back unless the
    person chose to quit or nothing is in flight; `request` asks, once at a time, and does what was chosen."""

    def __init__(self, window: MainWindow, agents: dict[str, AgentSession], running: RunningCalls) -> None:
        self.window, self.agents, self.running = window, agents, running
        self.quitting = False  # the person chose to quit (or nothing was in flight): the window may close
        self.question: asyncio.Future[QuitChoice] | None = None

    def work_in_flight(self) -> WorkInFlight:
        live = {sid for sid, a in self.agents.items() if a.running}
        approvals = sum(1 for i in self.window.inbox.model.items() if i.session_id in live)
        return WorkInFlight(calls=list(self.running.running.values()), approvals=approvals, turns=len(live))

    def guard(self) -> bool:
        return self.quitting or not self.work_in_flight()

    async def request(self) -> QuitChoice:
        if self.question is not None and not self.question.done():
            bring_to_front(self.window)
            return await asyncio.shield(self.question)
        work = self.work_in_flight()
        choice = QuitChoice.QUIT
        if work:
            self.question = ask_to_quit(self.window, work)
            choice = await self.question
        if choice is QuitChoice.WAIT:
            return choice
        if choice is QuitChoice.STOP:
            await self.stop_all()
        self.quitting = True
        self.window.close()
        return choice

    async def stop_all(self, timeout_s: float = 15.0) -> None:
        """Stop every running turn and wait for its end to be recorded (a call that ignores the stop is cut
        off by the sandbox's close after `timeout_s`)."""
        running = [a for a in self.agents.values() if a.running]
        for agent in running:
            agent.stop()
        if running:
            self.window.conversation.add_notice("Stopping the running calls before quitting…")
            await asyncio.wait([asyncio.ensure_future(a.wait()) for a in running], timeout=timeout_s)
