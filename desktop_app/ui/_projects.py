"""The projects sidebar: a tree model (projects, their sessions under them), a search filter, and the view."""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QRect, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QIcon, QKeySequence, QPainter, QPalette, QPixmap, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from ..core import AgentStateChanged, ProjectInfo, ProjectSettings, SessionInfo
from ._roles import Role


@dataclass(slots=True)
class _ProjectNode:
    info: ProjectInfo
    sessions: list[SessionInfo] = field(default_factory=list)


def project_subtitle(p: ProjectInfo) -> str:
    """The project's second line: its image first (its name, elided on the right when narrow), the mode, the
    network; the folder is the tooltip's."""
    network = ProjectSettings.of(p.settings).network
    net = "net allowlist" if network == "allowlist" else "net on" if network is True else "no net"
    return f"{p.image} · {p.permission_mode} · {net}"


def project_tooltip(p: ProjectInfo) -> str:
    return f"{p.path}\n{project_subtitle(p)}"


def elided_subtitle(fm: QFontMetrics, text: str, width: int) -> str:
    """The second line as drawn: cut on the right, so the image's name stays readable (never only its tail)."""
    return fm.elidedText(text, Qt.TextElideMode.ElideRight, width)


def session_title(s: SessionInfo) -> str:
    return s.title or time.strftime("Session %Y-%m-%d %H:%M", time.localtime(s.created_at))


_STATE_COLOURS = {"READY": "#2f9e44", "WORKING": "#3b82c4", "PAUSED": "#e8a33d", "STOPPED": "#868e96"}
_WAITS = {"approval": "waits for approval", "question": "asks you", "plan": "plan to review",
          "breakpoint": "at a breakpoint"}


def agent_state_label(ev: AgentStateChanged | None) -> str:
    """What the sidebar says after a session's title: nothing when it is ready."""
    if ev is None or ev.state == "READY":
        return ""
    if ev.state == "PAUSED":
        return _WAITS.get(ev.reason, "paused")
    if ev.state == "STOPPED" and ev.reason == "interrupted":
        return "interrupted"  # a crash (or kill) cut its calls short: see its notice
    return "working…" if ev.state == "WORKING" else "stopped"


@functools.cache
def agent_state_icon(state: str) -> QIcon:
    pix = QPixmap(10, 10)
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor(_STATE_COLOURS.get(state, "#868e96")))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(1, 1, 8, 8)
    painter.end()
    return QIcon(pix)


class ProjectsModel(QAbstractItemModel):
    """Two levels: projects at the top, each with its sessions (newest first)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._projects: list[_ProjectNode] = []
        self._agent_states: dict[str, AgentStateChanged] = {}  # session id -> its agent's last state

    def attach_agent_states(self, bridge: Any) -> None:
        """Follow every session's agent state (READY, WORKING, PAUSED, STOPPED): its row says it, live."""
        bridge.agentStateChanged.connect(self.set_agent_state)

    def set_agent_state(self, ev: AgentStateChanged) -> None:
        self._agent_states[ev.session_id] = ev
        idx = self.session_index(ev.session_id)
        if idx.isValid():
            self.dataChanged.emit(idx, idx)

    # internal pointer: None for a project row, the _ProjectNode for a session row
    def index(self, row: int, column: int, parent=QModelIndex()) -> QModelIndex:
        if column != 0 or row < 0:
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, 0, None) if row < len(self._projects) else QModelIndex()
        if parent.internalPointer() is None and parent.row() < len(self._projects):
            node = self._projects[parent.row()]
            return self.createIndex(row, 0, node) if row < len(node.sessions) else QModelIndex()
        return QModelIndex()

    def parent(self, index=QModelIndex()) -> QModelIndex:
        if not index.isValid():
            return QModelIndex()
        node = index.internalPointer()
        if node is None:
            return QModelIndex()
        return self.createIndex(self._row_of_node(node), 0, None)

    def rowCount(self, parent=QModelIndex()) -> int:
        if not parent.isValid():
            return len(self._projects)
        if parent.column() != 0 or parent.internalPointer() is not None:
            return 0
        return len(self._projects[parent.row()].sessions)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 1

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        node = index.internalPointer()
        if node is None:
            p = self._projects[index.row()].info
            if role == Qt.ItemDataRole.DisplayRole:
                return p.name
            if role == Role.SUBTITLE:
                return project_subtitle(p)
            if role == Qt.ItemDataRole.ToolTipRole:
                return project_tooltip(p)
            if role == Role.KIND:
                return "project"
            if role == Role.ID:
                return p.id
            if role == Role.OBJECT:
                return p
            return None
        s = node.sessions[index.row()]
        agent = self._agent_states.get(s.id)
        if role == Qt.ItemDataRole.DisplayRole:
            label = agent_state_label(agent)
            return f"{label} · {session_title(s)}" if label else session_title(s)  # the state first: titles elide
        if role == Qt.ItemDataRole.ToolTipRole and agent is not None:
            return f"{agent.state}{f' ({agent.reason})' if agent.reason else ''}: {agent.why}"
        if role == Qt.ItemDataRole.DecorationRole and agent is not None:
            return agent_state_icon(agent.state)
        if role == Role.AGENT_STATE:
            return (agent.state, agent.reason) if agent is not None else ("READY", "")
        if role in (Role.SUBTITLE, Qt.ItemDataRole.ToolTipRole):
            return time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated_at))
        if role == Role.KIND:
            return "session"
        if role == Role.ID:
            return s.id
        if role == Role.OBJECT:
            return s
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    # feeding -------------------------------------------------------------------------------------
    def set_data(self, projects: list[ProjectInfo], sessions: list[SessionInfo]) -> None:
        self.beginResetModel()
        by_project: dict[str, list[SessionInfo]] = {}
        for s in sessions:
            by_project.setdefault(s.project_id, []).append(s)
        self._projects = [
            _ProjectNode(p, sorted(by_project.get(p.id, []), key=lambda s: -s.updated_at)) for p in projects
        ]
        self.endResetModel()

    def upsert_project(self, p: ProjectInfo) -> QModelIndex:
        for i, node in enumerate(self._projects):
            if node.info.id == p.id:
                node.info = p
                idx = self.index(i, 0)
                self.dataChanged.emit(idx, idx)
                return idx
        n = len(self._projects)
        self.beginInsertRows(QModelIndex(), n, n)
        self._projects.append(_ProjectNode(p))
        self.endInsertRows()
        return self.index(n, 0)

    def upsert_session(self, s: SessionInfo) -> QModelIndex:
        pi = self.project_row(s.project_id)
        if pi < 0:
            return QModelIndex()
        node = self._projects[pi]
        parent = self.index(pi, 0)
        for i, old in enumerate(node.sessions):
            if old.id == s.id:
                node.sessions[i] = s
                idx = self.index(i, 0, parent)
                self.dataChanged.emit(idx, idx)
                return idx
        self.beginInsertRows(parent, 0, 0)
        node.sessions.insert(0, s)
        self.endInsertRows()
        return self.index(0, 0, parent)

    def project_row(self, project_id: str) -> int:
        for i, node in enumerate(self._projects):
            if node.info.id == project_id:
                return i
        return -1

    def project(self, project_id: str) -> ProjectInfo | None:
        i = self.project_row(project_id)
        return self._projects[i].info if i >= 0 else None

    def projects(self) -> list[ProjectInfo]:
        return [n.info for n in self._projects]

    def session_index(self, session_id: str) -> QModelIndex:
        for pi, node in enumerate(self._projects):
            for si, s in enumerate(node.sessions):
                if s.id == session_id:
                    return self.index(si, 0, self.index(pi, 0))
        return QModelIndex()

    def _row_of_node(self, node: _ProjectNode) -> int:
        for i, n in enumerate(self._projects):
            if n is node:
                return i
        return -1


class SessionSearchFilter(QSortFilterProxyModel):
    """Matches session titles (and project names); a project stays visible when a session matches."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setRecursiveFilteringEnabled(True)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)

    def filterAcceptsRow(self, source_row: int, source_parent) -> bool:
        pattern = self.filterRegularExpression().pattern()
        if not pattern:
            return True
        idx = self.sourceModel().index(source_row, 0, source_parent)
        text = f"{idx.data()} {idx.data(Role.SUBTITLE) or ''}"
        return pattern.lower() in text.lower()


class _TwoLineDelegate(QStyledItemDelegate):
    """Projects get a second, muted line: folder · image · permission mode."""

    def sizeHint(self, option, index) -> QSize:
        base = super().sizeHint(option, index)
        if index.data(Role.KIND) == "project":
            return QSize(base.width(), option.fontMetrics.height() * 2 + 8)
        return QSize(base.width(), option.fontMetrics.height() + 6)

    def paint(self, painter, option, index) -> None:
        if index.data(Role.KIND) != "project":
            super().paint(painter, option, index)
            return
        self.initStyleOption(option, index)
        style = option.widget.style() if option.widget else None
        text = option.text
        option.text = ""
        if style:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, option, painter, option.widget)
        painter.save()
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        fg = option.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        r = option.rect.adjusted(4, 3, -4, -3)
        h = option.fontMetrics.height()
        bold = QFont(option.font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(fg)
        painter.drawText(QRect(r.left(), r.top(), r.width(), h), Qt.AlignmentFlag.AlignVCenter, text)
        small = QFont(option.font)
        small.setPointSizeF(max(6.0, option.font.pointSizeF() * 0.85))
        painter.setFont(small)
        fg.setAlpha(160)
        painter.setPen(fg)
        sub = elided_subtitle(painter.fontMetrics(), index.data(Role.SUBTITLE) or "", r.width())
        painter.drawText(QRect(r.left(), r.top() + h + 1, r.width(), h), Qt.AlignmentFlag.AlignVCenter, sub)
        painter.restore()


class ProjectsSidebar(QWidget):
    """Search box, the project tree, and buttons for a new project, a new session, project settings."""

    sessionActivated = Signal(str)  # session id
    projectActivated = Signal(str)  # project id
    newProjectRequested = Signal()
    newSessionRequested = Signal(str)  # project id
    projectSettingsRequested = Signal(str)  # project id
    renameRequested = Signal(str)  # session id

    def __init__(self, model: ProjectsModel, parent=None) -> None:
        super().__init__(parent)
        self.model = model
        self.proxy = SessionSearchFilter(self)
        self.proxy.setSourceModel(model)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search sessions…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._search)
        self.tree = QTreeView()
        self.tree.setModel(self.proxy)
        self.tree.setHeaderHidden(True)
        self.tree.setItemDelegate(_TwoLineDelegate(self.tree))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setIndentation(12)
        self.tree.selectionModel().currentChanged.connect(self._current_changed)
        model.rowsInserted.connect(lambda parent, *_: self.tree.expand(self.proxy.mapFromSource(parent)))
        model.modelReset.connect(self.tree.expandAll)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        rename = QShortcut(QKeySequence("F2"), self.tree, self._rename_current)
        rename.setContext(Qt.ShortcutContext.WidgetShortcut)  # only while the tree has the focus

        def button(text: str, tip: str, slot) -> QToolButton:
            b = QToolButton()
            b.setText(text)
            b.setToolTip(tip)
            b.clicked.connect(slot)
            return b

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(button("+ Project", "Add a project folder", self.newProjectRequested.emit))
        bar.addWidget(button("+ Session", "New session in the selected project",
                             lambda: self._with_project(self.newSessionRequested.emit)))
        bar.addWidget(button("⚙", "Project settings", lambda: self._with_project(self.projectSettingsRequested.emit)))
        bar.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.search)
        lay.addWidget(self.tree, 1)
        lay.addLayout(bar)

    def _search(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self.tree.expandAll()

    def current_project_id(self) -> str | None:
        idx = self.tree.currentIndex()
        if not idx.isValid():
            return None
        if idx.data(Role.KIND) == "session":
            idx = idx.parent()
        return idx.data(Role.ID)

    def _with_project(self, fn) -> None:
        pid = self.current_project_id()
        if pid is None and self.model.rowCount():
            pid = self.model.index(0, 0).data(Role.ID)
        if pid:
            fn(pid)

    def select_session(self, session_id: str) -> None:
        idx = self.proxy.mapFromSource(self.model.session_index(session_id))
        if idx.isValid():
            self.tree.setCurrentIndex(idx)

    def _rename_current(self) -> None:
        idx = self.tree.currentIndex()
        if idx.isValid() and idx.data(Role.KIND) == "session":
            self.renameRequested.emit(idx.data(Role.ID))

    def _context_menu(self, pos) -> None:
        idx = self.tree.indexAt(pos)
        if not idx.isValid():
            return
        menu = QMenu(self)
        if idx.data(Role.KIND) == "session":
            sid = idx.data(Role.ID)
            menu.addAction("Rename…", lambda: self.renameRequested.emit(sid)).setShortcut(QKeySequence("F2"))
        else:
            pid = idx.data(Role.ID)
            menu.addAction("New session", lambda: self.newSessionRequested.emit(pid))
            menu.addAction("Project settings…", lambda: self.projectSettingsRequested.emit(pid))
        menu.popup(self.tree.viewport().mapToGlobal(pos))
        self.context_menu = menu  # kept for tests; replaced by the next one

    def _current_changed(self, current, _previous) -> None:
        if not current.isValid():
            return
        if current.data(Role.KIND) == "session":
            self.sessionActivated.emit(current.data(Role.ID))
        else:
            self.projectActivated.emit(current.data(Role.ID))


def ask_text(parent: QWidget, title: str, label: str, text: str) -> asyncio.Future[str | None]:
    """A one-line question, opened (never exec'd): the text, or None when cancelled."""
    dlg = QInputDialog(parent)
    dlg.setObjectName("AskText")
    dlg.setWindowTitle(title)
    dlg.setLabelText(label)
    dlg.setTextValue(text)
    future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def done(result: int) -> None:
        if not future.done():
            future.set_result(dlg.textValue() if result == QInputDialog.DialogCode.Accepted else None)
        dlg.deleteLater()

    dlg.finished.connect(done)
    dlg.open()
    future.add_done_callback(lambda f: f.cancelled() and isValid(dlg) and dlg.reject())
    return future
