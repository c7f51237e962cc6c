"""The audit history: search every project's tool calls, open one with its trail, export, verify.

The table model is lazy: it asks the store for a count and the first page, then pages in more as the
view scrolls (canFetchMore/fetchMore), so a million records open as fast as a hundred.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QDateTime, QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTableView,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..core import AgentDeskError, ToolCallRecord, ToolCallState, summarize_input
from ._rows import RowTableModel
from ._theme import format_duration, state_colour, state_icon
from ._timeline import CallIdRole, TimelineRow, render_call_details

PAGE = 500


@dataclass(slots=True)
class HistoryRow:
    id: str
    name: str
    state: ToolCallState
    outcome: str | None
    session_id: str
    project_id: str
    created_at: float
    duration_ms: float | None
    summary: str

    @classmethod
    def of(cls, r: Any) -> HistoryRow:
        """From a store RecordRow (input_preview) or a full ToolCallRecord (input)."""
        preview = getattr(r, "input_preview", None)
        if preview is None:
            preview = summarize_input(getattr(r, "input", {}) or {})
        else:
            try:
                preview = summarize_input(json.loads(preview))
            except (ValueError, TypeError):
                preview = " ".join(str(preview).split())[:120]
        outcome = getattr(r, "outcome", None)
        return cls(r.id, r.name, ToolCallState(r.state), getattr(outcome, "value", outcome), r.session_id,
                   r.project_id, r.created_at, r.duration_ms, preview)


def make_query(**kw: Any) -> Any:
    from ..store import AuditQuery  # the store package is optional at import time of the UI

    return AuditQuery(**kw)


class HistoryModel(RowTableModel):
    """Lazy, paged view of `store.query(AuditQuery)`, newest first."""

    COLUMNS = ("Time", "State", "Tool", "Input", "Duration", "Session")
    loaded = Signal(int, int)  # rows loaded, total
    failed = Signal(str)

    def __init__(self, store: Any = None, parent=None, page: int = PAGE) -> None:
        super().__init__(parent)
        self.store = store
        self.page = page
        self.total = 0
        self._rows: list[HistoryRow] = []
        self._filters: dict[str, Any] = {}
        self._fetching: asyncio.Task | None = None
        self._generation = 0
        self.project_names: dict[str, str] = {}
        self.session_names: dict[str, str] = {}

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        r = self._rows[index.row()]
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if c == 0:
                return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at))
            if c == 1:
                return r.state.value.lower() + (f" ({r.outcome})" if r.outcome and r.outcome != "ok" else "")
            if c == 2:
                return r.name
            if c == 3:
                return r.summary
            if c == 4:
                return format_duration(r.duration_ms)
            if c == 5:
                project = self.project_names.get(r.project_id, r.project_id[-6:])
                return f"{project} / {self.session_names.get(r.session_id, r.session_id[-8:])}"
            return None
        if role == Qt.ItemDataRole.DecorationRole and c == 1:
            return state_icon(r.state)
        if role == Qt.ItemDataRole.ForegroundRole and c == 1:
            return state_colour(r.state)
        if role == CallIdRole:
            return r.id
        return None

    # loading -------------------------------------------------------------------------------------
    def query_kwargs(self, offset: int, limit: int | None) -> dict[str, Any]:
        return {**self._filters, "offset": offset, "limit": limit}

    async def search(self, **filters: Any) -> None:
        """Reset to a new filter: count, then the first page. Older in-flight pages are dropped."""
        self._filters = {k: v for k, v in filters.items() if v not in (None, "", [])}
        self._generation += 1
        gen = self._generation
        if self._fetching is not None:
            self._fetching.cancel()
            self._fetching = None
        self.beginResetModel()
        self._rows = []
        self.total = 0
        self.endResetModel()
        if self.store is None:
            self.loaded.emit(0, 0)
            return
        try:
            count_q = make_query(**self.query_kwargs(0, None))
            total, rows = await asyncio.gather(
                self.store.count(count_q), self._page_fn()(make_query(**self.query_kwargs(0, self.page)))
            )
        except AgentDeskError as exc:
            self.failed.emit(exc.user_message())
            return
        if gen != self._generation:
            return
        self.total = int(total)
        self._append([HistoryRow.of(r) for r in rows])

    def _page_fn(self):
        # light rows (no payloads, no trails) when the store has them: a page costs one small SELECT
        return getattr(self.store, "list_records", None) or self.store.query

    def canFetchMore(self, parent=QModelIndex()) -> bool:
        return not parent.isValid() and len(self._rows) < self.total and self._fetching is None

    def fetchMore(self, parent=QModelIndex()) -> None:
        if not self.canFetchMore(parent):
            return
        self._fetching = asyncio.ensure_future(self._fetch_page(self._generation, len(self._rows)))

    async def _fetch_page(self, gen: int, offset: int) -> None:
        try:
            rows = await self._page_fn()(make_query(**self.query_kwargs(offset, self.page)))
        except AgentDeskError as exc:
            self.failed.emit(exc.user_message())
            rows = []
        finally:
            if gen == self._generation:
                self._fetching = None
        if gen == self._generation and offset == len(self._rows):
            self._append([HistoryRow.of(r) for r in rows])
            if not rows:
                self.total = len(self._rows)  # the store shrank under us

    def _append(self, rows: list[HistoryRow]) -> None:
        if rows:
            n = len(self._rows)
            self.beginInsertRows(QModelIndex(), n, n + len(rows) - 1)
            self._rows.extend(rows)
            self.endInsertRows()
        self.loaded.emit(len(self._rows), self.total)

    def row(self, i: int) -> HistoryRow:
        return self._rows[i]

    @property
    def filters(self) -> dict[str, Any]:
        return dict(self._filters)


async def save_file_dialog(parent, title: str, name: str, filters: str) -> str | None:
    """A non-blocking save dialog: open() + a future, never exec()."""
    dlg = QFileDialog(parent, title, name, filters)
    dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    fut = asyncio.get_event_loop().create_future()
    dlg.fileSelected.connect(lambda p: fut.done() or fut.set_result(p))
    dlg.rejected.connect(lambda: fut.done() or fut.set_result(None))
    dlg.open()
    try:
        return await fut
    finally:
        dlg.deleteLater()


class HistoryWindow(QMainWindow):
    """Search the store across projects and sessions; open a record with its full trail."""

    def __init__(self, store: Any = None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Audit history — Agent Desk")
        self.setObjectName("HistoryWindow")
        self.resize(1100, 700)
        self.store = store
        self.model = HistoryModel(store, self)

        self.text = QLineEdit()
        self.text.setPlaceholderText("Search input, output and errors…")
        self.text.setClearButtonEnabled(True)
        self.tool = QComboBox()
        self.tool.setEditable(True)
        self.tool.addItems(["", "bash_run", "bash_background", "fs_read", "fs_write", "fs_edit", "fs_list",
                            "fs_glob", "fs_grep", "todo_write"])
        self.tool.lineEdit().setPlaceholderText("any tool")
        self.state = QComboBox()
        self.state.addItem("any state", None)
        for s in ToolCallState:
            self.state.addItem(s.value.lower().replace("_", " "), s.value)
        now = QDateTime.currentDateTime()
        self.use_since = QCheckBox("from")
        self.since = QDateTimeEdit(now.addDays(-7))
        self.use_until = QCheckBox("to")
        self.until = QDateTimeEdit(now.addDays(1))
        for w in (self.since, self.until):
            w.setCalendarPopup(True)
            w.setDisplayFormat("yyyy-MM-dd HH:mm")
        self.search_btn = QPushButton("Search")
        self.search_btn.setDefault(True)
        self.search_btn.clicked.connect(self._search_clicked)
        self.text.returnPressed.connect(self._search_clicked)

        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(22)
        self.view.setShowGrid(False)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        hh = self.view.horizontalHeader()
        hh.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        for col, width in ((0, 140), (1, 130), (2, 100), (4, 70), (5, 150)):
            self.view.setColumnWidth(col, width)
        self.view.selectionModel().currentRowChanged.connect(self._open_current)
        self.details = QTextBrowser()
        self.details.setPlaceholderText("Select a record to see its full audit trail.")

        self.status = QLabel()
        self.verify_label = QLabel()
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Export the selected records (or every match) to JSONL or CSV")
        self.export_btn.clicked.connect(self._export_clicked)
        self.verify_btn = QPushButton("Verify chain")
        self.verify_btn.setToolTip("Check that the audit log's hash chain is intact")
        self.verify_btn.clicked.connect(self._verify_clicked)

        filters = QHBoxLayout()
        filters.addWidget(self.text, 3)
        filters.addWidget(self.tool, 1)
        filters.addWidget(self.state, 1)
        for w in (self.use_since, self.since, self.use_until, self.until, self.search_btn):
            filters.addWidget(w)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.view)
        split.addWidget(self.details)
        split.setSizes([700, 400])
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.verify_label)
        bottom.addWidget(self.verify_btn)
        bottom.addWidget(self.export_btn)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.addLayout(filters)
        lay.addWidget(split, 1)
        lay.addLayout(bottom)
        self.setCentralWidget(body)

        self.model.loaded.connect(self._loaded)
        self.model.failed.connect(lambda msg: self.status.setText(f"<span style='color:#d9363e'>{msg}</span>"))
        self._tasks: set[asyncio.Task] = set()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def filters(self) -> dict[str, Any]:
        f: dict[str, Any] = {
            "text": self.text.text().strip() or None,
            "tool": self.tool.currentText().strip() or None,
            "states": [self.state.currentData()] if self.state.currentData() else None,
        }
        if self.use_since.isChecked():
            f["since"] = self.since.dateTime().toSecsSinceEpoch()
        if self.use_until.isChecked():
            f["until"] = self.until.dateTime().toSecsSinceEpoch()
        return f

    async def refresh(self) -> None:
        self.status.setText("Searching…")
        await self.model.search(**self.filters())

    def _search_clicked(self) -> None:
        self._spawn(self.refresh())

    def _loaded(self, n: int, total: int) -> None:
        self.status.setText(f"{total:,} records match · {n:,} loaded")

    def _open_current(self, current, _prev=None) -> None:
        if current.isValid():
            self._spawn(self.open_record(current.data(CallIdRole)))

    async def open_record(self, record_id: str) -> ToolCallRecord | None:
        rec = await self.store.get_record(record_id) if self.store is not None else None
        if rec is None:
            self.details.setHtml(f"<p>Record {record_id} is not in the store.</p>")
            return None
        self.details.setHtml(render_call_details(TimelineRow.from_record(rec), rec=rec))
        return rec

    def selected_ids(self) -> list[str]:
        return [self.model.row(i.row()).id for i in self.view.selectionModel().selectedRows()]

    def _export_clicked(self) -> None:
        self._spawn(self.export_interactive())

    async def export_interactive(self) -> None:
        path = await save_file_dialog(self, "Export audit records", "audit.jsonl",
                                      "JSON Lines (*.jsonl);;CSV (*.csv)")
        if path:
            n = await self.export(path)
            self.status.setText(f"Exported {n:,} records to {path}")

    async def export(self, path: str, ids: list[str] | None = None) -> int:
        """Export the selected rows (or `ids`); with no selection, every record matching the filters."""
        fmt = "csv" if path.lower().endswith(".csv") else "jsonl"
        ids = ids if ids is not None else self.selected_ids()
        if not ids and hasattr(self.store, "export"):
            q = make_query(**self.model.query_kwargs(0, None))
            return int(await self.store.export(q, fmt, path))
        records = [r for r in await asyncio.gather(*(self.store.get_record(i) for i in ids)) if r]
        from ..store import write_records

        return await asyncio.get_running_loop().run_in_executor(None, write_records, records, fmt, path)

    def _verify_clicked(self) -> None:
        self._spawn(self.verify())

    async def verify(self) -> Any:
        self.verify_label.setText("Verifying…")
        self.verify_btn.setEnabled(False)
        try:
            result = await self.store.verify()
        except AgentDeskError as exc:
            self.verify_label.setText(f"<span style='color:#d9363e'>{exc}</span>")
            return None
        finally:
            self.verify_btn.setEnabled(True)
        if result.ok:
            self.verify_label.setText(f"<span style='color:#2f9e44'>✓ chain intact ({result.count:,} entries)"
                                      "</span>")
        else:
            msg = result.message or f"{result.problem} at seq {result.seq}"
            self.verify_label.setText(f"<span style='color:#d9363e'>✕ chain broken: {msg}</span>")
        return result
