"""The approval inbox dock: the cards of every session's pending calls, a details card for the selected
one, and the actions that answer it with core's Allow | Deny."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMainWindow,
    QMenu,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...core import (
    Allow,
    ApprovalDecision,
    ApprovalScope,
    Deny,
    PermissionDecided,
    PermissionRequired,
    SessionInfo,
    StateChanged,
    ToolCallRecord,
    ToolCallState,
    split_mcp_tool_name,
    suggest_rule,
)
from .._bridge import EventBridge
from .._mcp import McpCallName
from .._projects import session_title
from .._roles import Role
from .._tasks import BackgroundTasks
from ..dialogs import EditInputDialog, RulePreviewDialog
from ._card import FILE_TOOLS, TOGGLE_RAW, render_card
from ._delegate import InboxCardDelegate
from ._items import PendingApproval
from ._model import InboxModel
from ._questions import QuestionsPanel

SessionLookup = Callable[[str], SessionInfo | None]
McpNames = Callable[[str, str], McpCallName | None]  # (tool name, project id) -> its server and own name


def _mcp_name_parts(name: str, _project_id: str) -> McpCallName | None:
    split = split_mcp_tool_name(name)
    return McpCallName(*split) if split else None


EMPTY_HEIGHT = 64  # an empty inbox: its title and one line
LIST_ROWS_SHOWN = 2  # cards the list shows before it scrolls: the details card gets the rest
ROOM_FOR_TWO_ROWS = 520  # a dock shorter than this shows one card in the list (its title counts them all)
SHARE_OF_COLUMN = 0.70  # of the window's height the docked inbox takes when calls start waiting
MOST_CLAIMED = 640  # px: a tall window leaves the rest of the column to the timeline and its details
# The keys of a card's answers, shown on its buttons (in the list, the card and the buttons; typing in the note
# field types). The F1 list names them (ui/_mainwindow.py SHORTCUTS).
KEY_ALLOW, KEY_DENY, KEY_EDIT, KEY_ALWAYS, KEY_SESSION = "A", "D", "E", "W", "S"


class ApprovalInbox(QDockWidget):
    """Pending calls of every session; Ctrl+Enter allows, Ctrl+Backspace denies the selected cards (in the
    list or the card, never while typing in a text field)."""

    decided = Signal(str, str, object)  # call id, session id, Allow | Deny
    arrived = Signal(object)  # PendingApproval
    countChanged = Signal(int)

    def __init__(self, model: InboxModel | None = None, parent=None) -> None:
        super().__init__("Approvals", parent)
        self.setObjectName("ApprovalInbox")
        self.model = model or InboxModel(self)
        # async (item) -> diff text; set by the app to tools.preview_diff
        self.preview_provider: Callable[[PendingApproval], Awaitable[str | None]] | None = None
        # (item) -> path of the rules file "always allow" writes to; set by the app
        self.rules_target: Callable[[PendingApproval], str] = lambda item: ".agent-desk/rules.toml"
        self._session: SessionLookup = lambda _sid: None
        # set by the app to what the window knows of the servers; alone, the name's own parts
        self.mcp_names: McpNames = _mcp_name_parts
        self._tasks = BackgroundTasks()
        self._previews_asked: set[str] = set()
        self._raw_open = False  # the card's disclosure: the raw input and the provenance
        self._split_dragged = False  # once a person sized the list, the inbox leaves it as they set it
        self._claimed = False  # the column was given to the inbox since calls started waiting
        self._build_list()
        self._build_actions()
        self._lay_out()
        self.model.rowsInserted.connect(self._rows_inserted)
        self.model.rowsRemoved.connect(self._count_changed)
        self.model.dataChanged.connect(self._data_changed)
        self._count_changed()

    def _build_list(self) -> None:
        self.list = QListView()
        self.list.setModel(self.model)
        self.list.setItemDelegate(InboxCardDelegate(self.list))
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setUniformItemSizes(True)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.selectionModel().selectionChanged.connect(self._selection_changed)
        self.list.selectionModel().currentChanged.connect(lambda *_: self._show_current())
        self.card = QTextBrowser()
        self.card.setOpenLinks(False)
        self.card.anchorClicked.connect(self._anchor_clicked)
        self.note = QLineEdit()
        self.note.setPlaceholderText("Note for the model (sent with Allow or Deny: \"yes, but…\")")

    def _build_actions(self) -> None:
        self.allow_btn = QPushButton(f"Allow  [{KEY_ALLOW}]")
        self.allow_btn.setToolTip(f"Allow once ({KEY_ALLOW} or Ctrl+Enter)")
        self.allow_btn.setDefault(True)
        more = QMenu(self)
        self.allow_session_act = more.addAction(f"Allow for this session\t{KEY_SESSION}", self.allow_for_session)
        self.always_act = more.addAction(f"Always allow (write a rule)…\t{KEY_ALWAYS}",
                                         lambda: self._tasks.spawn(self.always_allow()))
        self.edit_act = more.addAction(f"Edit, then allow…\t{KEY_EDIT}",
                                       lambda: self._tasks.spawn(self.edit_then_allow()))
        self.edit_btn = QPushButton(f"Edit…  [{KEY_EDIT}]")
        self.edit_btn.setToolTip(f"Edit the input, then allow ({KEY_EDIT})")
        self.edit_btn.clicked.connect(self.edit_act.trigger)
        self.always_btn = QPushButton(f"Always…  [{KEY_ALWAYS}]")
        self.always_btn.setToolTip(f"Write a rule that allows calls like this one ({KEY_ALWAYS})")
        self.always_btn.clicked.connect(self.always_act.trigger)
        self.more_btn = QToolButton()
        self.more_btn.setText("More ▾")
        self.more_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more_btn.setMenu(more)
        self.deny_btn = QPushButton(f"Deny  [{KEY_DENY}]")
        self.deny_btn.setToolTip(f"Deny with the note ({KEY_DENY} or Ctrl+Backspace)")
        self.allow_btn.clicked.connect(self.allow_selected)
        self.deny_btn.clicked.connect(self.deny_selected)
        self.empty = QLabel("No calls are waiting for approval.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setEnabled(False)

    def _lay_out(self) -> None:
        actions = QVBoxLayout()  # two rows: the inbox keeps a narrow column at 1024 px
        answers, others = QHBoxLayout(), QHBoxLayout()
        answers.addWidget(self.allow_btn)
        answers.addStretch(1)
        answers.addWidget(self.deny_btn)
        for w in (self.edit_btn, self.always_btn, self.more_btn):
            others.addWidget(w)
        others.addStretch(1)
        actions.addLayout(answers)
        actions.addLayout(others)
        card_box = QWidget()
        cl = QVBoxLayout(card_box)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.card, 1)
        cl.addWidget(self.note)
        cl.addLayout(actions)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.list)
        self.split.addWidget(card_box)
        self.split.setStretchFactor(1, 1)
        self.split.splitterMoved.connect(self._split_moved)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        self.questions = QuestionsPanel()  # the model's questions and plans, above the approvals
        self.questions.countChanged.connect(self._count_changed)
        lay.addWidget(self.questions, 1)
        lay.addWidget(self.empty)
        lay.addWidget(self.split, 1)
        self.setWidget(body)
        # On the list and the card only: in the note field Ctrl+Backspace deletes a word, as everywhere.
        for widget in (self.list, self.card):
            for keys, slot in (("Ctrl+Return", self.allow_selected), ("Ctrl+Enter", self.allow_selected),
                               ("Ctrl+Backspace", self.deny_selected)):
                sc = QShortcut(QKeySequence(keys), widget)
                sc.setContext(Qt.ShortcutContext.WidgetShortcut)
                sc.activated.connect(slot)
        self._answer_keys()

    def _answer_keys(self) -> None:
        """One key per answer, in the card list, the details card and on the buttons (not in the note field,
        where a letter is typed, nor in the questions panel above)."""
        keys = ((KEY_ALLOW, self.allow_selected), (KEY_DENY, self.deny_selected),
                (KEY_EDIT, self.edit_act.trigger), (KEY_ALWAYS, self.always_act.trigger),
                (KEY_SESSION, self.allow_for_session))
        for widget in (self.list, self.card, self.allow_btn, self.edit_btn, self.always_btn, self.more_btn,
                       self.deny_btn):
            for key, slot in keys:
                sc = QShortcut(QKeySequence(key), widget)
                sc.setContext(Qt.ShortcutContext.WidgetShortcut)
                sc.activated.connect(slot)

    def focus_first(self) -> bool:
        """Bring the inbox forward and put the focus on its first card: a question or plan's answer, else the
        first waiting call. False when nothing waits."""
        if not self.isVisible():
            self.show()
        self.raise_()
        if self.questions.current is not None:
            self.questions.focus_answer()
            return True
        if self.model.rowCount() == 0:
            self.list.setFocus()
            return False
        self.list.clearSelection()
        self.list.setCurrentIndex(self.model.index(0))
        self.list.setFocus()
        return True

    # feeding -----------------------------------------------------------------------------------
    def attach(self, bridge: EventBridge, sessions: SessionLookup) -> None:
        """Follow every session's approvals (not only the current one's); `sessions` names their cards."""
        self._session = sessions
        bridge.permissionRequired.connect(self._on_required)
        bridge.permissionDecided.connect(self._on_decided)
        bridge.stateChanged.connect(self._on_state)
        self.questions.attach(bridge, lambda sid: session_title(s) if (s := sessions(sid)) else sid[-8:])

    def _on_required(self, ev: PermissionRequired) -> None:
        self.add(self._labelled(PendingApproval.from_event(ev)))

    def _on_decided(self, ev: PermissionDecided) -> None:
        self.remove(ev.call_id)

    def _on_state(self, ev: StateChanged) -> None:
        # answered anywhere (another front end, an expiry, a seal): the card goes
        if ev.previous == ToolCallState.APPROVAL_REQUIRED.value and ev.state != ev.previous:
            self.remove(ev.call_id)

    def restore(self, records: list[ToolCallRecord]) -> None:
        """Calls still waiting from an earlier run of the app (answered once their session reopens)."""
        for rec in records:
            self.add(self._labelled(PendingApproval.from_record(rec)))

    def _labelled(self, item: PendingApproval) -> PendingApproval:
        # a sub-agent's card is labelled with its parent's session (its own name is in item.subagent)
        parent = str(item.meta.get("parent_session_id") or "")
        s = (self._session(parent) if parent else None) or self._session(item.session_id)
        item.project_id = item.project_id or (s.project_id if s else "")
        item.session_title = session_title(s) if s else item.session_id[-8:]
        item.mcp = self.mcp_names(item.name, item.project_id)
        where = str(item.meta.get("mcp_where") or "")
        if item.mcp is not None and not item.mcp.where and where:  # the engine said where, the window had not seen it
            item.mcp = dataclasses.replace(item.mcp, where=where)
        return item

    def add(self, item: PendingApproval) -> None:
        self._previews_asked.discard(item.call_id)  # an edited call offered again needs its own diff
        if self.model.add(item):
            self.arrived.emit(item)

    def remove(self, call_id: str) -> None:
        self.model.remove(call_id)

    # selection ---------------------------------------------------------------------------------
    def selected(self) -> list[PendingApproval]:
        rows = sorted({i.row() for i in self.list.selectionModel().selectedRows()})
        if not rows and self.list.currentIndex().isValid():
            rows = [self.list.currentIndex().row()]
        return [self.model.item(r) for r in rows]

    def _rows_inserted(self, _parent, first: int, _last: int) -> None:
        if not self.list.currentIndex().isValid():
            self.list.setCurrentIndex(self.model.index(first))
        self._count_changed()

    def _count_changed(self, *_: object) -> None:
        n = self.model.rowCount()
        self.setWindowTitle(f"Approvals ({n})" if n else "Approvals")
        idle = n == 0 and self.questions.current is None
        was_claimed = self._claimed
        self.empty.setVisible(idle)
        self.split.setVisible(n > 0)
        if idle and was_claimed:  # once the list and card are hidden, so the dock can be a line again
            QTimer.singleShot(0, self._give_back_space)
        if n == 0:
            self._claimed = False
        elif not self._claimed:
            self._claim_space()
        self._size_list(n)
        self.countChanged.emit(n)
        self._selection_changed()

    def _claim_space(self) -> None:
        """Calls start waiting: the docked inbox takes most of its column, so the card reads whole at
        1024x700 without a person dragging a splitter (the timeline keeps the rest)."""
        window = self.parentWidget()
        if isinstance(window, QMainWindow) and not self.isFloating() and self.isVisible():
            self._share_column(min(int(window.height() * SHARE_OF_COLUMN), MOST_CLAIMED))
            self._claimed = True

    def _share_column(self, height: int) -> None:
        """This dock `height` high; the docks above and below it in the column share the rest."""
        window = self.parentWidget()
        column = [d for d in window.findChildren(QDockWidget) if d is not self and not d.isFloating()
                  and d.isVisible() and window.dockWidgetArea(d) == window.dockWidgetArea(self)]
        rest = max(0, sum(d.height() for d in column) + self.height() - height)
        sizes = [rest // len(column)] * len(column) if column else []
        window.resizeDocks([*column, self], [*sizes, height], Qt.Orientation.Vertical)

    def fit_column(self) -> None:
        """Take the column when calls wait (once: a person's drag of the splitter stays), or give it back when
        nothing does; the window calls it once it is laid out and after each resize."""
        if self.model.rowCount():
            if not self._claimed:
                self._claim_space()
        elif self.questions.current is None:
            self._give_back_space()

    def _give_back_space(self) -> None:
        """Nothing waits: the inbox shrinks to its one line and the timeline (with its details) gets the column."""
        window = self.parentWidget()
        idle = not self.model.rowCount() and self.questions.current is None
        if idle and isinstance(window, QMainWindow) and not self.isFloating() and self.isVisible():
            self._share_column(EMPTY_HEIGHT)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.model.rowCount() and not self._claimed:  # calls waited before the window showed
            QTimer.singleShot(0, self._claim_space)
        elif not self.model.rowCount() and self.questions.current is None:
            QTimer.singleShot(0, self._give_back_space)

    def _size_list(self, n: int) -> None:
        """The list as high as its first cards, the details card below it the rest."""
        if self._split_dragged or n == 0:
            return
        rows = min(n, LIST_ROWS_SHOWN if self.height() >= ROOM_FOR_TWO_ROWS else 1)
        list_h = rows * InboxCardDelegate.HEIGHT + 2 * self.list.frameWidth() + 4
        total = max(sum(self.split.sizes()), self.split.height(), list_h + 200)
        self.split.setSizes([list_h, total - list_h])

    def _split_moved(self, *_: object) -> None:
        self._split_dragged = True

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._size_list(self.model.rowCount())

    def _data_changed(self, top, _bottom, _roles=()) -> None:
        if self.list.currentIndex().row() == top.row():
            self._show_current()

    def _selection_changed(self, *_: object) -> None:
        n = len(self.selected())
        self.allow_btn.setText(f"Allow {n} selected  [{KEY_ALLOW}]" if n > 1 else f"Allow  [{KEY_ALLOW}]")
        self.deny_btn.setText(f"Deny {n} selected  [{KEY_DENY}]" if n > 1 else f"Deny  [{KEY_DENY}]")
        for w in (self.allow_btn, self.deny_btn, self.more_btn):
            w.setEnabled(n > 0)
        for w in (self.more_btn, self.edit_btn, self.always_btn):
            w.setEnabled(n == 1)
        self._show_current()

    def _show_current(self) -> None:
        idx = self.list.currentIndex()
        if not idx.isValid():
            self.card.clear()
            return
        item: PendingApproval = idx.data(Role.ITEM)
        scroll = self.card.verticalScrollBar().value()
        self.card.setHtml(render_card(item, raw_open=self._raw_open))
        self.card.verticalScrollBar().setValue(scroll)  # the countdown's tick redraws: the reader keeps their place
        if not self.list.viewport().rect().contains(self.list.visualRect(idx)):  # the selected card, whole
            self.list.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtTop)
        if item.preview is None and item.name in FILE_TOOLS and self.preview_provider:
            if item.call_id not in self._previews_asked:
                self._previews_asked.add(item.call_id)
                self._tasks.spawn(self._load_preview(item))

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.toString() == TOGGLE_RAW:
            self._raw_open = not self._raw_open
            self._show_current()

    def toggle_raw(self) -> None:
        """Fold or unfold the card's raw input and provenance (the disclosure's link does the same)."""
        self._anchor_clicked(QUrl(TOGGLE_RAW))

    async def _load_preview(self, item: PendingApproval) -> None:
        assert self.preview_provider is not None
        try:
            item.preview = await self.preview_provider(item) or ""
        except Exception as exc:  # a preview is a nicety; say why it is missing
            item.preview = f"(no preview: {exc})"
        self.model.touch(item.call_id)

    # actions -----------------------------------------------------------------------------------
    def _decide(self, items: list[PendingApproval], decision: ApprovalDecision) -> None:
        for item in items:
            self.decided.emit(item.call_id, item.session_id, decision)
        self.note.clear()

    def allow_selected(self) -> None:
        self._decide(self.selected(), Allow(ApprovalScope.ONCE, note=self.note.text().strip()))

    def allow_for_session(self) -> None:
        self._decide(self.selected(), Allow(ApprovalScope.SESSION, note=self.note.text().strip()))

    def deny_selected(self) -> None:
        self._decide(self.selected(), Deny(note=self.note.text().strip()))

    def _single_selected(self) -> PendingApproval | None:
        items = self.selected()
        return items[0] if len(items) == 1 else None

    async def always_allow(self) -> str | None:
        """Preview the rule core suggests (editable), then allow with it written to the rules file."""
        item = self._single_selected()
        if item is None:
            return None
        dlg = RulePreviewDialog(suggest_rule(item.name, item.input).text, self.rules_target(item), self)
        rule = await dlg.ask()
        dlg.deleteLater()
        if rule and self.model.row_of(item.call_id) >= 0:
            self._decide([item], Allow(ApprovalScope.ALWAYS, rule=rule, note=self.note.text().strip()))
        return rule

    async def edit_then_allow(self) -> dict | None:
        item = self._single_selected()
        if item is None:
            return None
        dlg = EditInputDialog(item.name, item.input, self)
        data = await dlg.ask()
        dlg.deleteLater()
        if data is not None and self.model.row_of(item.call_id) >= 0:
            self._decide([item], Allow(ApprovalScope.ONCE, edited_input=data, note=self.note.text().strip()))
        return data
