"""The approval inbox: pending calls from every open session, a list model with a painted card per row,
and a details card for the selected call with the allow/deny actions."""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..core import PermissionRequired, ToolCallRecord, summarize_input
from ._theme import RISK_COLOURS
from ._timeline import diff_html

ItemRole = Qt.ItemDataRole.UserRole + 1
CallIdRole = Qt.ItemDataRole.UserRole + 2


@dataclass(slots=True)
class PendingApproval:
    """One call waiting for a person: what it is, how risky, and why it asks."""

    call_id: str
    session_id: str
    name: str
    input: dict[str, Any]
    risk: str = "low"
    reason: str = ""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None
    received_at: float = field(default_factory=time.time)
    project_id: str = ""
    session_title: str = ""
    preview: str | None = None  # diff text, filled lazily for fs_write / fs_edit

    @classmethod
    def from_event(cls, ev: PermissionRequired) -> PendingApproval:
        return cls(
            call_id=ev.call_id, session_id=ev.session_id, name=ev.name, input=dict(ev.input or {}),
            risk=ev.risk or "low", reason=ev.reason, provenance=list(ev.provenance or []),
            meta=dict(ev.meta or {}), expires_at=ev.expires_at,
            preview=(ev.meta or {}).get("diff"),
        )

    @classmethod
    def from_record(cls, rec: ToolCallRecord) -> PendingApproval:
        meta = dict(rec.approval.meta or {})
        prov = [p.to_dict() for p in rec.provenance]
        reason = meta.get("reason") or (f"{prov[-1]['kind']}: {prov[-1]['detail']}" if prov else "")
        return cls(
            call_id=rec.id, session_id=rec.session_id, project_id=rec.project_id, name=rec.name,
            input=dict(rec.input), risk=rec.risk, reason=reason, provenance=prov, meta=meta,
            expires_at=rec.approval.expires_at, received_at=rec.updated_at, preview=meta.get("diff"),
        )

    @property
    def why(self) -> str:
        """The reason the call asks, with where that came from (a rule, the mode, a hook)."""
        if self.reason:
            return self.reason
        for p in reversed(self.provenance):
            if p.get("decision") == "ask" or p is self.provenance[-1]:
                src = f" ({p['source']})" if p.get("source") else ""
                return f"{p.get('kind', '?')}: {p.get('detail', '')}{src}"
        return "permission mode asks"

    def remaining_s(self, now: float | None = None) -> float | None:
        if self.expires_at is None:
            return None
        return self.expires_at - (time.time() if now is None else now)


@dataclass(slots=True)
class InboxDecision:
    """What the person decided; the app turns it into the executor's Decision."""

    call_id: str
    session_id: str
    allow: bool
    scope: str = "once"  # once | session | always
    note: str = ""
    edited_input: dict[str, Any] | None = None
    rule: str | None = None


class InboxModel(QAbstractListModel):
    """Pending approvals, oldest first, indexed by call id."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._items: list[PendingApproval] = []
        self._countdown = QTimer(self, interval=1000)
        self._countdown.timeout.connect(self._tick)

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._items)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._items)):
            return None
        item = self._items[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{item.name}: {summarize_input(item.input, 80)}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{item.name} ({item.risk} risk)\n{item.why}"
        if role == ItemRole:
            return item
        if role == CallIdRole:
            return item.call_id
        return None

    def add(self, item: PendingApproval) -> bool:
        if self.row_of(item.call_id) >= 0:
            return False
        n = len(self._items)
        self.beginInsertRows(QModelIndex(), n, n)
        self._items.append(item)
        self.endInsertRows()
        if item.expires_at is not None and not self._countdown.isActive():
            self._countdown.start()
        return True

    def remove(self, call_id: str) -> PendingApproval | None:
        i = self.row_of(call_id)
        if i < 0:
            return None
        self.beginRemoveRows(QModelIndex(), i, i)
        item = self._items.pop(i)
        self.endRemoveRows()
        if not any(it.expires_at is not None for it in self._items):
            self._countdown.stop()
        return item

    def row_of(self, call_id: str) -> int:
        for i, it in enumerate(self._items):
            if it.call_id == call_id:
                return i
        return -1

    def item(self, row: int) -> PendingApproval:
        return self._items[row]

    def get(self, call_id: str) -> PendingApproval | None:
        i = self.row_of(call_id)
        return self._items[i] if i >= 0 else None

    def items(self) -> list[PendingApproval]:
        return list(self._items)

    def touch(self, call_id: str) -> None:
        i = self.row_of(call_id)
        if i >= 0:
            self.dataChanged.emit(self.index(i), self.index(i))

    def _tick(self) -> None:
        for i, it in enumerate(self._items):
            if it.expires_at is not None:
                self.dataChanged.emit(self.index(i), self.index(i))


class InboxCardDelegate(QStyledItemDelegate):
    """Paints a compact card: tool and input, risk chip, why it asks, and a countdown."""

    HEIGHT = 58

    def sizeHint(self, option, index) -> QSize:
        return QSize(120, self.HEIGHT)  # the width follows the view

    def paint(self, painter, option, index) -> None:
        item: PendingApproval = index.data(ItemRole)
        if item is None:
            return
        painter.save()
        pal = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        r = option.rect.adjusted(3, 2, -3, -2)
        bg = pal.color(QPalette.ColorRole.Highlight) if selected else pal.color(QPalette.ColorRole.AlternateBase)
        painter.setRenderHint(painter.RenderHint.Antialiasing)
        painter.setPen(QColor(RISK_COLOURS.get(item.risk, "#8a8f98")))
        painter.setBrush(bg)
        painter.drawRoundedRect(r, 5, 5)
        fg = pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        bold = QFont(option.font)
        bold.setBold(True)
        small = QFont(option.font)
        small.setPointSizeF(max(6.0, option.font.pointSizeF() * 0.88))
        x = r.left() + 8
        # line 1: risk chip, tool, countdown
        chip = QRect(x, r.top() + 7, QFontMetrics(small).horizontalAdvance(item.risk) + 14, 15)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(RISK_COLOURS.get(item.risk, "#8a8f98")))
        painter.drawRoundedRect(chip, 7, 7)
        painter.setPen(QColor("white"))
        painter.setFont(small)
        painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, item.risk)
        painter.setPen(fg)
        painter.setFont(bold)
        painter.drawText(QRect(chip.right() + 8, r.top() + 5, r.width() - 140, 19),
                         Qt.AlignmentFlag.AlignVCenter, item.name)
        left = item.remaining_s()
        if left is not None:
            painter.setFont(small)
            painter.drawText(QRect(r.right() - 90, r.top() + 5, 82, 19),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             "expired" if left <= 0 else f"{int(left) // 60}:{int(left) % 60:02d} left")
        # line 2: the input, line 3: why
        painter.setFont(option.font)
        fm = painter.fontMetrics()
        text = fm.elidedText(summarize_input(item.input, 200), Qt.TextElideMode.ElideRight,
                             r.width() - 16)
        painter.drawText(QRect(x, r.top() + 23, r.width() - 16, 16), Qt.AlignmentFlag.AlignVCenter, text)
        painter.setFont(small)
        muted = QColor(fg)
        muted.setAlpha(170)
        painter.setPen(muted)
        why = painter.fontMetrics().elidedText(f"asks because {item.why}", Qt.TextElideMode.ElideRight,
                                               r.width() - 16)
        painter.drawText(QRect(x, r.top() + 38, r.width() - 16, 15), Qt.AlignmentFlag.AlignVCenter, why)
        painter.restore()


def suggest_rule(item: PendingApproval) -> str:
    """The narrow rule 'always allow' proposes (core's suggestion: a command prefix, a folder)."""
    from ..core import suggest_rule as core_suggest

    return core_suggest(item.name, item.input).text


class _FutureDialog(QDialog):
    """A dialog opened with open(); `result_future` resolves when it closes, so async code can await it."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.result_future: asyncio.Future | None = None
        self.finished.connect(self._done)

    def ask(self) -> asyncio.Future:
        self.result_future = asyncio.get_event_loop().create_future()
        self.open()
        return self.result_future

    def value(self) -> Any:
        return True

    def _done(self, code: int) -> None:
        fut = self.result_future
        if fut is not None and not fut.done():
            fut.set_result(self.value() if code == QDialog.DialogCode.Accepted else None)


class RulePreviewDialog(_FutureDialog):
    """Shows the rule that 'always allow' will write, and where, before writing it."""

    def __init__(self, rule: str, target: str, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Always allow: preview the rule")
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"This rule will be added to <code>{html.escape(target)}</code>:"))
        self.edit = QLineEdit(rule)
        lay.addWidget(self.edit)
        lay.addWidget(QLabel("<small>Future calls that match it run without asking. Edit it to make it "
                             "narrower.</small>"))
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)

    def value(self) -> str | None:
        return self.edit.text().strip() or None


class EditInputDialog(_FutureDialog):
    """Edit the call's JSON input, then allow it; refuses to close on invalid JSON."""

    def __init__(self, item: PendingApproval, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit, then allow: {item.name}")
        self.resize(560, 360)
        lay = QVBoxLayout(self)
        self.edit = QPlainTextEdit(json.dumps(item.input, indent=2, ensure_ascii=False))
        self.edit.setFont(QFont("monospace"))
        self.error = QLabel()
        self.error.setStyleSheet("color: #d9363e")
        lay.addWidget(self.edit)
        lay.addWidget(self.error)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        bb.button(QDialogButtonBox.StandardButton.Ok).setText("Allow edited")
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)
        self._parsed: dict | None = None

    def _check(self) -> None:
        try:
            data = json.loads(self.edit.toPlainText())
        except json.JSONDecodeError as exc:
            self.error.setText(f"Not valid JSON: {exc}")
            return
        if not isinstance(data, dict):
            self.error.setText("The input must be a JSON object.")
            return
        self._parsed = data
        self.accept()

    def value(self) -> dict | None:
        return self._parsed


class ApprovalInbox(QDockWidget):
    """Pending calls of every session; Ctrl+Enter allows, Ctrl+Backspace denies the selected cards."""

    decided = Signal(object)  # InboxDecision
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
        self.note = QLineEdit()
        self.note.setPlaceholderText("Note for the model (sent with a deny)")

        self.allow_btn = QPushButton("Allow")
        self.allow_btn.setToolTip("Allow once (Ctrl+Enter)")
        self.allow_btn.setDefault(True)
        more = QMenu(self)
        self.allow_session_act = more.addAction("Allow for this session", self.allow_for_session)
        self.always_act = more.addAction("Always allow (write a rule)…", self._always_clicked)
        self.edit_act = more.addAction("Edit, then allow…", self._edit_clicked)
        self.more_btn = QToolButton()
        self.more_btn.setText("More ▾")
        self.more_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more_btn.setMenu(more)
        self.deny_btn = QPushButton("Deny")
        self.deny_btn.setToolTip("Deny with the note (Ctrl+Backspace)")
        self.allow_btn.clicked.connect(self.allow_selected)
        self.deny_btn.clicked.connect(self.deny_selected)
        self.empty = QLabel("No calls are waiting for approval.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setEnabled(False)

        actions = QHBoxLayout()
        actions.addWidget(self.allow_btn)
        actions.addWidget(self.more_btn)
        actions.addStretch(1)
        actions.addWidget(self.deny_btn)
        card_box = QWidget()
        cl = QVBoxLayout(card_box)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.card, 1)
        cl.addWidget(self.note)
        cl.addLayout(actions)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.list)
        self.split.addWidget(card_box)
        self.split.setSizes([160, 240])
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.empty)
        lay.addWidget(self.split, 1)
        self.setWidget(body)

        for keys, slot in (("Ctrl+Return", self.allow_selected), ("Ctrl+Enter", self.allow_selected),
                           ("Ctrl+Backspace", self.deny_selected)):
            sc = QShortcut(QKeySequence(keys), body)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(slot)

        self.model.rowsInserted.connect(self._rows_inserted)
        self.model.rowsRemoved.connect(self._count_changed)
        self.model.dataChanged.connect(self._data_changed)
        self._preview_tasks: dict[str, asyncio.Task] = {}
        self._dialog_tasks: set[asyncio.Task] = set()
        self._count_changed()

    # feeding -----------------------------------------------------------------------------------
    def add(self, item: PendingApproval) -> None:
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
        self.empty.setVisible(n == 0)
        self.split.setVisible(n > 0)
        self.countChanged.emit(n)
        self._selection_changed()

    def _data_changed(self, top, _bottom, _roles=()) -> None:
        if self.list.currentIndex().row() == top.row():
            self._show_current()

    def _selection_changed(self, *_: object) -> None:
        n = len(self.selected())
        self.allow_btn.setText(f"Allow {n} selected" if n > 1 else "Allow")
        self.deny_btn.setText(f"Deny {n} selected" if n > 1 else "Deny")
        for w in (self.allow_btn, self.deny_btn, self.more_btn):
            w.setEnabled(n > 0)
        self.more_btn.setEnabled(n == 1)
        self._show_current()

    def _show_current(self) -> None:
        idx = self.list.currentIndex()
        if not idx.isValid():
            self.card.clear()
            return
        item: PendingApproval = idx.data(ItemRole)
        self.card.setHtml(render_card(item))
        if item.preview is None and item.name in ("fs_write", "fs_edit") and self.preview_provider:
            if item.call_id not in self._preview_tasks:
                self._preview_tasks[item.call_id] = asyncio.ensure_future(self._load_preview(item))

    async def _load_preview(self, item: PendingApproval) -> None:
        try:
            item.preview = await self.preview_provider(item) or ""
        except Exception as exc:  # a preview is a nicety; say why it is missing
            item.preview = f"(no preview: {exc})"
        self.model.touch(item.call_id)

    # actions -----------------------------------------------------------------------------------
    def _decide(self, items: list[PendingApproval], **kw: Any) -> None:
        for item in items:
            self.decided.emit(InboxDecision(item.call_id, item.session_id, **kw))
        self.note.clear()

    def allow_selected(self) -> None:
        self._decide(self.selected(), allow=True, scope="once")

    def allow_for_session(self) -> None:
        self._decide(self.selected(), allow=True, scope="session")

    def deny_selected(self) -> None:
        self._decide(self.selected(), allow=False, note=self.note.text().strip())

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._dialog_tasks.add(task)
        task.add_done_callback(self._dialog_tasks.discard)

    def _always_clicked(self) -> None:
        self._spawn(self.always_allow())

    def _edit_clicked(self) -> None:
        self._spawn(self.edit_then_allow())

    async def always_allow(self) -> str | None:
        items = self.selected()
        if len(items) != 1:
            return None
        item = items[0]
        dlg = RulePreviewDialog(suggest_rule(item), self.rules_target(item), self)
        rule = await dlg.ask()
        dlg.deleteLater()
        if rule and self.model.row_of(item.call_id) >= 0:
            self._decide([item], allow=True, scope="always", rule=rule)
        return rule

    async def edit_then_allow(self) -> dict | None:
        items = self.selected()
        if len(items) != 1:
            return None
        item = items[0]
        dlg = EditInputDialog(item, self)
        data = await dlg.ask()
        dlg.deleteLater()
        if data is not None and self.model.row_of(item.call_id) >= 0:
            self._decide([item], allow=True, scope="once", edited_input=data)
        return data


def render_card(item: PendingApproval) -> str:
    e = html.escape
    colour = RISK_COLOURS.get(item.risk, "#8a8f98")
    parts = [
        f"<h3 style='margin:0'>{e(item.name)} <span style='color:{colour}'>· {e(item.risk)} risk</span></h3>",
        f"<p style='margin:2px 0'><small>session {e(item.session_title or item.session_id[-8:])}"
        f" · asks because <b>{e(item.why)}</b></small></p>",
    ]
    left = item.remaining_s()
    if left is not None:
        parts.append(f"<p style='color:#d4890b'>{'Expired' if left <= 0 else f'Expires in {int(left)} s'}</p>")
    if item.name.startswith("bash") and isinstance(item.input.get("command"), str):
        parts += ["<p style='margin:4px 0'><b>Command</b></p>",
                  f"<pre style='background:rgba(127,127,127,40)'>$ {e(item.input['command'])}</pre>"]
        rest = {k: v for k, v in item.input.items() if k != "command"}
        if rest:
            parts.append(f"<pre>{e(json.dumps(rest, ensure_ascii=False))}</pre>")
    else:
        parts += ["<p style='margin:4px 0'><b>Input</b></p>",
                  f"<pre>{e(json.dumps(item.input, indent=2, ensure_ascii=False)[:4000])}</pre>"]
    if item.name in ("fs_write", "fs_edit"):
        parts.append("<p style='margin:4px 0'><b>Diff preview</b></p>")
        if item.preview is None:
            parts.append("<p><i>computing…</i></p>")
        else:
            parts.append(diff_html(item.preview) if item.preview else "<p><i>no changes</i></p>")
    if item.provenance:
        parts.append("<p style='margin:4px 0'><b>Provenance</b></p><ul style='margin:0'>")
        for p in item.provenance:
            src = f" ({e(p.get('source', ''))})" if p.get("source") else ""
            parts.append(f"<li>{e(p.get('decision', ''))} by {e(p.get('kind', ''))}: "
                         f"<code>{e(str(p.get('detail', '')))}</code>{src}</li>")
        parts.append("</ul>")
    return "".join(parts)
