"""The main window: projects sidebar, conversation with its input box, timeline and approval docks,
the first-run banner and the status bar. It only shows things: its views follow the event bridge
themselves, and the app controller answers what the person does."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QSystemTrayIcon,
    QVBoxLayout,
    QWidget,
)

from ._conversation import ConversationView
from ._projects import ProjectsModel, ProjectsSidebar
from ._statusbar import AgentStatusBar
from ._theme import bring_to_front
from .inbox import ApprovalInbox, PendingApproval
from .timeline import TimelineDock, TimelineModel

# What Help › Keyboard shortcuts lists; the README's table says the same.
SHORTCUTS: tuple[tuple[str, str], ...] = (
    ("Enter", "send the prompt (Shift+Enter: a new line)"),
    ("Esc", "stop the agent (in the prompt box); close the audit history (in its window)"),
    ("Ctrl+N", "new session in the selected project"),
    ("Ctrl+,", "settings"),
    ("Ctrl+H", "audit history"),
    ("F2", "rename the selected session (in the sidebar)"),
    ("F1", "this list"),
    ("Ctrl+Q", "quit (asks first when work is in flight)"),
)


class PromptEdit(QPlainTextEdit):
    """Enter sends, Shift+Enter adds a line, Esc interrupts."""

    submitted = Signal(str)
    interruptRequested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("Ask the agent…  (Enter sends, Shift+Enter new line, Esc stops)")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(110)
        self.setMinimumHeight(52)

    def keyPressEvent(self, event) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.ControlModifier)
        ):
            text = self.toPlainText().strip()
            if text:
                self.submitted.emit(text)
                self.clear()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            self.interruptRequested.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class Banner(QFrame):
    """A strip above the conversation that says what is missing and offers the fix."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#Banner { background: rgba(212, 137, 11, 40); border: 1px solid #d4890b;"
                           " border-radius: 4px; }")
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(8, 6, 8, 6)
        self._lay.setSpacing(4)
        self._rows: dict[str, QWidget] = {}
        self.hide()

    def set_item(self, key: str, text: str, actions: list[tuple[str, object]] = ()) -> None:
        self.clear_item(key)
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(label, 1)
        for title, slot in actions:
            b = QPushButton(title)
            b.clicked.connect(slot)
            lay.addWidget(b)
        self._rows[key] = row
        self._lay.addWidget(row)
        self.show()

    def clear_item(self, key: str) -> None:
        row = self._rows.pop(key, None)
        if row is not None:
            row.setParent(None)
            row.deleteLater()
        self.setVisible(bool(self._rows))

    def text(self) -> str:
        return "\n".join(w.findChild(QLabel).text() for w in self._rows.values())


class MainWindow(QMainWindow):
    """Shows one session at a time; the docks show the current session's calls and every session's approvals."""

    promptSubmitted = Signal(str)
    stopRequested = Signal()
    settingsRequested = Signal()
    historyRequested = Signal()
    checksRequested = Signal()
    aboutRequested = Signal()
    compactRequested = Signal()  # File › Compact conversation: the current session, summarised by the model
    shown = Signal()
    quitRequested = Signal()  # a close the quit guard held back: the controller asks the person
    closed = Signal()  # the window really closed (app.py then closes the controller, sandboxes, store)
    retryRequested = Signal()  # the Retry of the conversation's error line
    shortcutsRequested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Agent Desk")
        self.setObjectName("MainWindow")
        self.resize(1440, 880)
        self.setDockNestingEnabled(True)
        self._build_docks()
        self._build_centre()
        self.status = AgentStatusBar(self)
        self.inbox.arrived.connect(self.notify_approval)
        self.inbox.countChanged.connect(self._approvals_changed)
        self._tray: QSystemTrayIcon | None = None
        # Set by app.py: returns whether the window may close now (nothing in flight, or the person chose).
        self.quit_guard: Callable[[], bool] | None = None
        self._build_menus()

    def _build_docks(self) -> None:
        self.projects_model = ProjectsModel(self)
        self.sidebar = ProjectsSidebar(self.projects_model)
        self.projects_dock = QDockWidget("Projects", self)
        self.projects_dock.setObjectName("ProjectsDock")
        self.projects_dock.setWidget(self.sidebar)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.projects_dock)
        self.timeline_model = TimelineModel(self)
        self.timeline = TimelineDock(self.timeline_model, self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.timeline)
        self.inbox = ApprovalInbox(parent=self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.inbox)
        self.splitDockWidget(self.timeline, self.inbox, Qt.Orientation.Vertical)
        self.resizeDocks([self.projects_dock, self.timeline], [250, 500], Qt.Orientation.Horizontal)
        self.resizeDocks([self.timeline, self.inbox], [430, 400], Qt.Orientation.Vertical)

    def _build_centre(self) -> None:
        self.banner = Banner()
        self.approval_banner = Banner()
        self.session_label = QLabel()
        self.session_label.setStyleSheet("font-weight: bold; padding: 2px 4px")
        self.conversation = ConversationView()
        self.prompt = PromptEdit()
        self.send_btn = QPushButton("Send")
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.setToolTip("Interrupt the agent (Esc)")
        self.stop_btn.setEnabled(False)
        self.send_btn.clicked.connect(self._send_clicked)
        self.stop_btn.clicked.connect(self.stopRequested.emit)
        self.prompt.submitted.connect(self.promptSubmitted.emit)
        self.prompt.interruptRequested.connect(self.stopRequested.emit)
        self.conversation.callActivated.connect(self.timeline.select_call)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_btn)
        buttons.addWidget(self.stop_btn)
        buttons.addStretch(1)
        input_row = QHBoxLayout()
        input_row.addWidget(self.prompt, 1)
        input_row.addLayout(buttons)
        centre = QWidget()
        lay = QVBoxLayout(centre)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.banner)
        lay.addWidget(self.approval_banner)
        lay.addWidget(self.session_label)
        lay.addWidget(self.conversation, 1)
        lay.addLayout(input_row)
        self.setCentralWidget(centre)

    def _build_menus(self) -> None:
        m = self.menuBar().addMenu("&File")
        self.new_project_act = m.addAction("New project…", self.sidebar.newProjectRequested.emit)
        self.new_session_act = m.addAction(
            "New session", lambda: self.sidebar._with_project(self.sidebar.newSessionRequested.emit))
        self.new_session_act.setShortcut(QKeySequence("Ctrl+N"))
        m.addAction("Project settings…",
                    lambda: self.sidebar._with_project(self.sidebar.projectSettingsRequested.emit))
        self.compact_act = m.addAction("Compact conversation", self.compactRequested.emit)
        self.compact_act.setToolTip("Summarise the older turns with the model (the audit keeps the originals)")
        m.addSeparator()
        self.settings_act = m.addAction("Settings…", self.settingsRequested.emit)
        # Ctrl+, everywhere (the platform's Preferences key is empty on most Linux desktops)
        self.settings_act.setShortcuts([QKeySequence("Ctrl+,"), *QKeySequence.keyBindings(
            QKeySequence.StandardKey.Preferences)])
        m.addSeparator()
        self.quit_act = m.addAction("Quit", self.close)
        self.quit_act.setShortcut(QKeySequence("Ctrl+Q"))
        v = self.menuBar().addMenu("&View")
        hist = v.addAction("Audit history…", self.historyRequested.emit)
        hist.setShortcut(QKeySequence("Ctrl+H"))
        v.addSeparator()
        for dock in (self.projects_dock, self.timeline, self.inbox):
            act: QAction = dock.toggleViewAction()
            v.addAction(act)
        self.history_act = hist
        h = self.menuBar().addMenu("&Help")
        self.help_menu = h
        keys = h.addAction("Keyboard shortcuts", self.shortcutsRequested.emit)
        keys.setShortcut(QKeySequence("F1"))
        h.addAction("Check setup…", self.checksRequested.emit)
        h.addSeparator()
        h.addAction("About Agent Desk", self.aboutRequested.emit)

    def _send_clicked(self) -> None:
        text = self.prompt.toPlainText().strip()
        if text:
            self.prompt.clear()
            self.promptSubmitted.emit(text)

    def set_running(self, running: bool) -> None:
        self.stop_btn.setEnabled(running)
        self.send_btn.setEnabled(not running)
        self.status.activity.setText("working…" if running else "")

    # approvals -------------------------------------------------------------------------------------
    def _approvals_changed(self, n: int) -> None:
        self.setWindowTitle(f"Agent Desk — {n} waiting" if n else "Agent Desk")
        if n == 0:
            self.approval_banner.clear_item("approvals")

    def notify_approval(self, item: PendingApproval) -> None:
        """Tell the person a call waits: a desktop notification when away, else an in-window banner."""
        if self.isActiveWindow():
            return
        text = f"{item.name} wants to run: {item.input.get('command') or item.input.get('path') or ''}"
        tray = self._tray_icon()
        if tray is not None:
            tray.showMessage("Agent Desk: approval needed", text, QSystemTrayIcon.MessageIcon.Warning, 8000)
            return
        n = self.inbox.model.rowCount()
        self.approval_banner.set_item(
            "approvals",
            f"⚠ {n} call{'s' if n != 1 else ''} waiting for approval — latest: <b>{item.name}</b>",
            [("Review", self._review)],
        )

    def _review(self) -> None:
        bring_to_front(self.inbox)
        self.inbox.list.setFocus()
        self.approval_banner.clear_item("approvals")

    def _tray_icon(self) -> QSystemTrayIcon | None:
        if QGuiApplication.platformName() in ("offscreen", "minimal"):
            return None
        if not QSystemTrayIcon.isSystemTrayAvailable() or not QSystemTrayIcon.supportsMessages():
            return None
        if self._tray is None:
            self._tray = QSystemTrayIcon(self.windowIcon(), self)
            self._tray.activated.connect(lambda *_: (bring_to_front(self), self._review()))
            self._tray.messageClicked.connect(self._review)
            self._tray.show()
        return self._tray

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.shown.emit()

    def closeEvent(self, event) -> None:
        """Ctrl+Q, the menu and the title bar's close all come here: with work in flight the quit guard
        holds the close back and the controller asks; otherwise the window goes."""
        if self.quit_guard is not None and not self.quit_guard():
            event.ignore()
            self.quitRequested.emit()
            return
        super().closeEvent(event)
        self.closed.emit()
