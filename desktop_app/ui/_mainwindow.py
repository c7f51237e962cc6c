"""The main window: projects sidebar, conversation with its input box, timeline and approval docks,
the first-run banner and the status bar. It only shows things: its views follow the event bridge
themselves, and the app controller answers what the person does."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
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

from ..core import PermissionMode
from ._builds import image_builds
from ._conversation import ConversationView
from ._projects import ProjectsModel, ProjectsSidebar
from ._prompt_images import AttachmentStrip
from ._statusbar import AgentStatusBar
from ._theme import bring_to_front
from .dialogs import MODE_HELP
from .inbox import KEY_ALLOW, KEY_ALWAYS, KEY_DENY, KEY_EDIT, KEY_SESSION, ApprovalInbox, PendingApproval
from .timeline import TimelineDock, TimelineModel

# What Help › Keyboard shortcuts lists; the README's table says the same.
INBOX_KEY = "Ctrl+I"  # from anywhere: the inbox's first card (a question, a plan or a waiting call)
SHORTCUTS: tuple[tuple[str, str], ...] = (
    ("Enter or Ctrl+Enter", "send the prompt (Shift+Enter: a new line)"),
    ("Shift+Tab", "next permission mode of this session (in the prompt box): ask, accept-edits, auto, plan…"),
    ("Esc", "stop the agent (in the prompt box); close the audit history (in its window)"),
    (INBOX_KEY, "go to the approvals: the first waiting question, plan or call"),
    (KEY_ALLOW, "allow the selected call (in the approvals; also Ctrl+Enter)"),
    (KEY_DENY, "deny the selected call with the note (in the approvals; also Ctrl+Backspace)"),
    (KEY_EDIT, "edit the selected call's input, then allow it (in the approvals)"),
    (KEY_ALWAYS, "always allow calls like the selected one: write a rule (in the approvals)"),
    (KEY_SESSION, "allow the selected call for this session (in the approvals)"),
    ("Ctrl+N", "new session in the selected project"),
    ("Ctrl+,", "settings"),
    ("Ctrl+H", "audit history"),
    ("F2", "rename the selected session (in the sidebar)"),
    ("F1", "this list"),
    ("Ctrl+Q", "quit (asks first when work is in flight)"),
)


class PromptEdit(QPlainTextEdit):
    """Enter and Ctrl+Enter send, Shift+Enter adds a line, Esc interrupts, Shift+Tab switches the mode."""

    submitted = Signal(str)
    interruptRequested = Signal()
    nextModeRequested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("Ask the agent…  (Enter sends, Shift+Enter new line, Esc stops)")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(110)
        self.setMinimumHeight(52)
        self.attachments: AttachmentStrip | None = None  # where pasted or dropped images go

    def canInsertFromMimeData(self, source) -> bool:
        return (self.attachments is not None and self.attachments.accepts(source)) or super().canInsertFromMimeData(
            source)

    def insertFromMimeData(self, source) -> None:
        if self.attachments is not None and self.attachments.add_mime(source):
            return
        super().insertFromMimeData(source)

    def sizeHint(self) -> QSize:  # three lines: the conversation above gets the height
        return QSize(super().sizeHint().width(), 64)

    def event(self, event) -> bool:
        # Shift+Tab would move the focus back (QWidget handles it before keyPressEvent): here, as in Claude
        # Code, it is the next mode
        if event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Backtab:
            self.nextModeRequested.emit()
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            text = self.toPlainText().strip()
            if text or (self.attachments is not None and self.attachments.count()):
                self.submitted.emit(text)
                self.clear()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            self.interruptRequested.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class ModePicker(QWidget):
    """The current session's permission mode, always in view, with its one-sentence meaning; switchable."""

    modeChosen = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.box = QComboBox()
        self.box.setAccessibleName("Permission mode of this session")
        for m in PermissionMode:
            self.box.addItem(m.value, m.value)
            self.box.setItemData(self.box.count() - 1, MODE_HELP.get(m, ""), Qt.ItemDataRole.ToolTipRole)
        self.help = QLabel()
        self.help.setWordWrap(True)
        self.help.setStyleSheet("color: #8a8f98")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Mode"))
        lay.addWidget(self.box)
        lay.addWidget(self.help, 1)
        self.box.activated.connect(lambda i: self.modeChosen.emit(self.box.itemData(i)))
        self.box.currentIndexChanged.connect(self._show_help)
        self._show_help()

    def mode(self) -> str:
        return self.box.currentData()

    def set_mode(self, mode: str) -> None:
        """Show `mode` (the session's): no modeChosen, it is already so."""
        self.box.setCurrentIndex(max(0, self.box.findData(mode)))

    def next_mode(self) -> None:
        """The next mode in the list, chosen (Shift+Tab in the prompt)."""
        self.box.setCurrentIndex((self.box.currentIndex() + 1) % self.box.count())
        self.modeChosen.emit(self.mode())

    def _show_help(self, *_: object) -> None:
        text = MODE_HELP.get(PermissionMode(self.mode()), "") if self.mode() else ""
        self.help.setText(text)
        self.box.setToolTip(text)


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
        self.status.follow_builds(image_builds(), self)
        self.set_tab_order()
        self._fit = QTimer(self, singleShot=True, interval=0)
        self._fit.timeout.connect(self.fit_columns)
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
        self.attachments = AttachmentStrip()
        self.prompt.attachments = self.attachments
        self.send_btn = QPushButton("Send")
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.setToolTip("Interrupt the agent (Esc)")
        self.stop_btn.setEnabled(False)
        self.send_btn.clicked.connect(self._send_clicked)
        self.stop_btn.clicked.connect(self.stopRequested.emit)
        self.prompt.submitted.connect(self.promptSubmitted.emit)
        self.prompt.interruptRequested.connect(self.stopRequested.emit)
        self.mode_picker = ModePicker()
        self.prompt.nextModeRequested.connect(self.mode_picker.next_mode)
        self.conversation.callActivated.connect(self.timeline.select_call)
        self.conversation.attach_records(self.timeline_model.outputAppended, self.timeline_model.recordLoaded)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_btn)
        buttons.addWidget(self.stop_btn)
        buttons.addWidget(self.attachments.attach_btn)
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
        lay.addWidget(self.attachments)
        lay.addLayout(input_row)
        lay.addWidget(self.mode_picker)
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
        self.inbox_act = v.addAction("Go to approvals", self.focus_inbox)
        self.inbox_act.setShortcut(QKeySequence(INBOX_KEY))
        self.inbox_act.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)  # from the history window too
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
        if text or self.attachments.count():
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
        self.inbox.focus_first()
        self.approval_banner.clear_item("approvals")

    def focus_inbox(self) -> bool:
        """The global approvals key: this window in front, the focus on the inbox's first card."""
        if self.isMinimized():
            self.showNormal()
        bring_to_front(self)
        self.approval_banner.clear_item("approvals")
        return self.inbox.focus_first()

    def set_tab_order(self) -> None:
        """Tab from the prompt reaches the send and stop buttons, the mode, then the approvals, then the rest."""
        ib = self.inbox
        chain = [self.prompt, self.send_btn, self.stop_btn, self.mode_picker.box, ib.questions.reply,
                 ib.questions.approve_btn, ib.questions.reject_btn, ib.questions.send_btn, ib.list, ib.card,
                 ib.note, ib.allow_btn, ib.edit_btn, ib.always_btn, ib.more_btn, ib.deny_btn,
                 self.conversation, self.timeline.view, self.sidebar.search]
        for a, b in itertools.pairwise(chain):
            QWidget.setTabOrder(a, b)

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

    def fit_columns(self) -> None:
        """The conversation keeps at least half the width: the side columns give way on a narrow window
        (a person's wider conversation is left as it is)."""
        width = self.width()
        if self.centralWidget().width() >= width // 2:
            self.inbox.fit_column()
            return
        left = min(260, max(150, int(width * 0.17), self.projects_dock.minimumSizeHint().width()))
        left = left if self.projects_dock.isVisible() else 0
        right = max(280, width - left - width // 2 - 16)
        docks = [d for d, _ in ((self.projects_dock, left), (self.timeline, right)) if d.isVisible()]
        sizes = [size for d, size in ((self.projects_dock, left), (self.timeline, right)) if d.isVisible()]
        if docks:
            self.resizeDocks(docks, sizes, Qt.Orientation.Horizontal)
            self.inbox.fit_column()  # a horizontal resize shares the column again: the inbox keeps its part

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit.start()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._fit.start()
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
