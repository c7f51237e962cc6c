"""Quitting with work in flight: what still runs or waits (from the bridge), and the question put to the
person before the window goes: wait, stop the running calls, or quit anyway."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox, QWidget
from shiboken6 import isValid

from ..core import StateChanged, ToolCallState, ToolEnd, ToolStart, summarize_input
from ._bridge import EventBridge


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
