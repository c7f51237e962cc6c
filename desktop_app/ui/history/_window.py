"""The audit history window: search every project's tool calls, open one with its trail, export, verify."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from PySide6.QtCore import QDateTime, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ...core import AgentDeskError, ToolCallRecord, ToolCallState, plural
from ...runtime import builtin_tools, write_records
from .._roles import Role
from .._rows import record_table
from .._tasks import BackgroundTasks
from ..dialogs import ask_file
from ..timeline import TimelineRow, render_call_details
from ._charts import HistoryCharts
from ._model import HistoryModel, make_query


class HistoryWindow(QMainWindow):
    """Search the store across projects and sessions; open a record with its full trail."""

    def __init__(self, store: Any = None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Audit history — Agent Desk")
        self.setObjectName("HistoryWindow")
        self.resize(1100, 700)
        self.store = store
        self.model = HistoryModel(store, self)
        self._tasks = BackgroundTasks()
        self._build_filters()
        self._build_view()
        self._build_footer()
        self._lay_out()
        self.tabs.currentChanged.connect(self._tab_shown)
        self.model.loaded.connect(self._loaded)
        self.model.failed.connect(lambda msg: self.status.setText(f"<span style='color:#d9363e'>{msg}</span>"))

    def _build_filters(self) -> None:
        self.text = QLineEdit()
        self.text.setPlaceholderText("Search input, output and errors…")
        self.text.setClearButtonEnabled(True)
        self.tool = QComboBox()
        self.tool.setEditable(True)
        self.tool.addItems(["", *sorted(t.name for t in builtin_tools())])
        self.tool.lineEdit().setPlaceholderText("any tool")
        self.project = QComboBox()  # filled from the store when the window opens
        self.project.addItem("any project", None)
        self.risk = QComboBox()
        self.risk.addItem("any risk", None)
        for r in ("low", "medium", "high"):
            self.risk.addItem(f"{r} risk", r)
        self.domain = QLineEdit()
        self.domain.setPlaceholderText("network domain")
        self.domain.setToolTip("Calls that connected (or tried to) to this domain or its subdomains")
        self.decider = QComboBox()
        for label, value in (("anyone decided", None), ("a person decided", "person"),
                             ("the desk decided", "desk"), ("a rule decided", "rule"),
                             ("the mode decided", "mode"), ("a hook decided", "hook"),
                             ("the approval expired", "expiry")):
            self.decider.addItem(label, value)
        self.decider.setToolTip("A person answered the call's approval, or the rules, the mode or a hook decided")
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
        self.domain.returnPressed.connect(self._search_clicked)

    def _build_view(self) -> None:
        self.view = record_table(self.model, QAbstractItemView.SelectionMode.ExtendedSelection, stretch=3,
                                 widths=((0, 140), (1, 130), (2, 100), (4, 70), (5, 150)))
        self.view.selectionModel().currentRowChanged.connect(self._open_current)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._show_export_counts())
        self.details = QTextBrowser()
        self.details.setPlaceholderText("Select a record to see its full audit trail.")
        self.charts = HistoryCharts(self.store)
        self.charts.failed.connect(lambda msg: self.status.setText(f"<span style='color:#d9363e'>{msg}</span>"))

    def _build_footer(self) -> None:
        self.status = QLabel()
        self.verify_label = QLabel()
        # Export writes what the list shows, every match; a selection is exported only when asked for (a row
        # clicked to read its details is selected, and once made Export write that one record alone)
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Export every record the list shows (all matches) to JSONL or CSV")
        self.export_btn.clicked.connect(lambda: self._tasks.spawn(self.export_interactive()))
        self.export_selected_btn = QPushButton("Export selected…")
        self.export_selected_btn.setToolTip("Export only the selected records to JSONL or CSV")
        self.export_selected_btn.setEnabled(False)
        self.export_selected_btn.clicked.connect(lambda: self._tasks.spawn(self.export_interactive(selected=True)))
        self.verify_btn = QPushButton("Verify chain")
        self.verify_btn.setToolTip("Check that the audit log's hash chain is intact")
        self.verify_btn.clicked.connect(lambda: self._tasks.spawn(self.verify()))

    def _lay_out(self) -> None:
        filters = QHBoxLayout()
        filters.addWidget(self.text, 3)
        filters.addWidget(self.project, 1)
        filters.addWidget(self.tool, 1)
        filters.addWidget(self.state, 1)
        filters.addWidget(self.risk)
        filters.addWidget(self.decider)
        filters.addWidget(self.domain, 1)
        for w in (self.use_since, self.since, self.use_until, self.until, self.search_btn):
            filters.addWidget(w)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.view)
        split.addWidget(self.details)
        split.setSizes([700, 400])
        self.tabs = QTabWidget()
        self.tabs.addTab(split, "Records")
        self.tabs.addTab(self.charts, "Charts")  # the charts of the same filters, drawn when this tab is shown
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.verify_label)
        bottom.addWidget(self.verify_btn)
        bottom.addWidget(self.export_selected_btn)
        bottom.addWidget(self.export_btn)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.addLayout(filters)
        lay.addWidget(self.tabs, 1)
        lay.addLayout(bottom)
        self.setCentralWidget(body)

    def filters(self) -> dict[str, Any]:
        f: dict[str, Any] = {
            "text": self.text.text().strip() or None,
            "tool": self.tool.currentText().strip() or None,
            "states": [self.state.currentData()] if self.state.currentData() else None,
            "project_id": self.project.currentData(),
            "risk": self.risk.currentData(),
            "decider": self.decider.currentData(),
            "domain": self.domain.text().strip() or None,
        }
        if self.use_since.isChecked():
            f["since"] = self.since.dateTime().toSecsSinceEpoch()
        if self.use_until.isChecked():
            f["until"] = self.until.dateTime().toSecsSinceEpoch()
        return f

    async def load_projects(self) -> None:
        """The project filter's choices: every stored project (read off the GUI thread by the store)."""
        if self.store is None or not hasattr(self.store, "list_projects"):
            return
        chosen = self.project.currentData()
        projects = sorted(await self.store.list_projects(), key=lambda p: p.name.lower())
        self.project.clear()
        self.project.addItem("any project", None)
        for p in projects:
            self.project.addItem(p.name, p.id)
        self.project.setCurrentIndex(max(0, self.project.findData(chosen)))

    async def refresh(self) -> None:
        if self.project.count() == 1:  # the first search: the projects to filter by, too
            await self.load_projects()
        self.status.setText("Searching…")
        self.details.clear()  # a new search: the record of the last one is not shown as if it matched
        charts = self._charts_load()  # the Charts tab, when shown, follows the search at once
        await asyncio.gather(self.model.search(**self.filters()), *([charts] if charts else []))

    async def show_charts(self) -> list[Any]:
        """The Charts tab, drawn for the filters as they are (what a search shows)."""
        self.tabs.blockSignals(True)  # loaded here, awaited, rather than by the tab's signal
        self.tabs.setCurrentWidget(self.charts)
        self.tabs.blockSignals(False)
        charts = self._charts_load()
        return await charts if charts else self.charts.charts

    def _tab_shown(self, _index: int) -> None:
        charts = self._charts_load()
        if charts:
            self._tasks.spawn(charts)

    def _charts_load(self) -> Coroutine[Any, Any, list[Any]] | None:
        """The load of the charts of the current filters, when their tab is shown and they show other filters."""
        if self.tabs.currentWidget() is not self.charts or self.charts.filters == self.filters():
            return None
        names = {self.project.itemData(i): self.project.itemText(i) for i in range(1, self.project.count())}
        self.charts.project_names = {**names, **self.model.project_names}
        return self.charts.load(self.filters())

    def _search_clicked(self) -> None:
        self._tasks.spawn(self.refresh())

    def _loaded(self, n: int, total: int) -> None:
        self.status.setText(f"{plural(total, 'record')} match · {n:,} loaded")
        self._show_export_counts()

    def _show_export_counts(self) -> None:
        total = self.model.total
        self.export_btn.setText(f"Export {plural(total, 'record')}…")
        n = len(self.view.selectionModel().selectedRows())
        self.export_selected_btn.setEnabled(n > 0)
        self.export_selected_btn.setText(f"Export {n:,} selected…" if n else "Export selected…")

    def _open_current(self, current, _prev=None) -> None:
        record_id = current.data(Role.CALL_ID) if current.isValid() else None
        if record_id:  # None while the row's page is on its way back
            self._tasks.spawn(self.open_record(record_id))

    async def open_record(self, record_id: str) -> ToolCallRecord | None:
        rec = await self.store.get_record(record_id) if self.store is not None else None
        if rec is None:
            self.details.setHtml(f"<p>Record {record_id} is not in the store.</p>")
            return None
        self.details.setHtml(render_call_details(TimelineRow.from_record(rec), rec=rec))
        return rec

    async def selected_ids(self) -> list[str]:
        """The selected records' ids, in the table's order (rows scrolled far away are fetched again)."""
        rows = sorted(i.row() for i in self.view.selectionModel().selectedRows())
        return [r.id for r in await self.model.rows(rows)]

    async def export_interactive(self, *, selected: bool = False) -> None:
        start = Path.home() / f"agent-desk-audit-{time.strftime('%Y-%m-%d')}.jsonl"  # not the app's working folder
        path = await ask_file(self, "Export audit records", str(start), "JSON Lines (*.jsonl);;CSV (*.csv)",
                              save=True)
        if path:
            n = await self.export(path, selected=selected)
            self.status.setText(f"Exported {plural(n, 'record')} to {path}")

    async def export(self, path: str, ids: list[str] | None = None, *, selected: bool = False) -> int:
        """Export every record the list shows (all that match the search); with `selected`, the selected rows
        only; or the records `ids`."""
        fmt = "csv" if path.lower().endswith(".csv") else "jsonl"
        if ids is None:
            ids = await self.selected_ids() if selected else []
        if not ids and not selected and hasattr(self.store, "export"):
            q = make_query(**self.model.query_kwargs(0, None))
            return int(await self.store.export(q, fmt, path))
        records = [r for r in await asyncio.gather(*(self.store.get_record(i) for i in ids)) if r]
        return await asyncio.get_running_loop().run_in_executor(None, write_records, records, fmt, path)

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
