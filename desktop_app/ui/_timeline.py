"""The tool-call timeline: a table model fed by events (100k rows stay smooth), its filter, and the dock."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import (
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableView,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..core import ToolCallRecord, ToolCallState, summarize_input
from ._rows import RowTableModel
from ._theme import STATE_LABEL, bring_to_front, format_duration, state_colour, state_icon

CallIdRole = Qt.ItemDataRole.UserRole + 1
StateRole = Qt.ItemDataRole.UserRole + 2
ToolRole = Qt.ItemDataRole.UserRole + 3

_MAX_OUTPUT = 200_000  # characters of streamed output kept per call in memory


@dataclass(slots=True)
class TimelineRow:
    call_id: str
    name: str
    summary: str
    state: ToolCallState
    session_id: str = ""
    created_at: float = 0.0
    duration_ms: float | None = None
    exit_code: int | None = None
    outcome: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    record: ToolCallRecord | None = None  # the last full record seen, for the details pane

    @classmethod
    def from_record(cls, rec: ToolCallRecord) -> TimelineRow:
        return cls(
            call_id=rec.id,
            name=rec.name,
            summary=summarize_input(rec.input),
            state=rec.state,
            session_id=rec.session_id,
            created_at=rec.created_at,
            duration_ms=rec.duration_ms,
            exit_code=exit_code_of(rec),
            outcome=rec.outcome.value if rec.outcome else None,
            input=rec.input,
            record=rec,
        )


def exit_code_of(rec: ToolCallRecord) -> int | None:
    details = (rec.result or {}).get("details") or {}
    code = details.get("exit_code")
    return code if isinstance(code, int) else None


class TimelineModel(RowTableModel):
    """Every tool call of a session, one row each, in the order they started."""

    COLUMNS = ("State", "Tool", "Input", "Duration", "Exit")
    outputAppended = Signal(str, str)  # call_id, text
    rowChanged = Signal(str)  # call_id

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[TimelineRow] = []
        self._index: dict[str, int] = {}
        self._pending: list[TimelineRow] = []  # inserted at the next flush, in one beginInsertRows
        self._output: dict[str, list[str]] = {}
        self._flush = QTimer(self, singleShot=True, interval=0)
        self._flush.timeout.connect(self.flush)

    # Qt model API ------------------------------------------------------------------------------
    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        row = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return _STATE_LABEL[row.state]
            if col == 1:
                return row.name
            if col == 2:
                return row.summary
            if col == 3:
                return format_duration(row.duration_ms)
            if col == 4:
                return "" if row.exit_code is None else str(row.exit_code)
            return None
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            return state_icon(row.state)
        if role == Qt.ItemDataRole.ForegroundRole and col == 0:
            return state_colour(row.state)
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = f"{row.name}: {row.summary}\nstate: {row.state.value}"
            return tip + (f" ({row.outcome})" if row.outcome else "")
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == CallIdRole:
            return row.call_id
        if role == StateRole:
            return row.state.value
        if role == ToolRole:
            return row.name
        return None

    # feeding -----------------------------------------------------------------------------------
    def add_records(self, records: Iterable[ToolCallRecord]) -> None:
        """Load many records at once (a session's history): one insert for the lot."""
        new = []
        for rec in records:
            if rec.id in self._index:
                self.update_record(rec)
            else:
                new.append(TimelineRow.from_record(rec))
        self._insert(new)

    def _insert(self, rows: list[TimelineRow]) -> None:
        if not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        for i, row in enumerate(rows, first):
            self._index[row.call_id] = i
            self._rows.append(row)
        self.endInsertRows()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        self._insert([r for r in pending if r.call_id not in self._index])

    def upsert_started(self, call_id: str, name: str, data: dict[str, Any], session_id: str = "",
                       at: float = 0.0) -> None:
        """A tool:start event: add a PENDING row (inserts are batched to the next loop turn)."""
        row = self._find(call_id)
        if row is not None:
            if data:
                row.input = data
                row.summary = summarize_input(data)
                self._changed(call_id)
            return
        self._pending.append(
            TimelineRow(call_id, name, summarize_input(data), ToolCallState.PENDING, session_id, at,
                        input=dict(data))
        )
        self._flush.start()

    def set_state(self, call_id: str, state: str, name: str = "", session_id: str = "") -> None:
        row = self._find(call_id)
        if row is None:
            self.upsert_started(call_id, name, {}, session_id)
            row = self._find(call_id)
        if row is not None:
            row.state = ToolCallState(state)
            self._changed(call_id)

    def end(self, call_id: str, state: str, outcome: str | None, duration_ms: float | None) -> None:
        row = self._find(call_id)
        if row is None:
            return
        if state:
            row.state = ToolCallState(state)
        row.outcome = outcome
        row.duration_ms = duration_ms
        self._changed(call_id)

    def update_record(self, rec: ToolCallRecord) -> None:
        """A full record (from the store): it has the exit code, the result and the trail."""
        row = self._find(rec.id)
        if row is None:
            self._insert([TimelineRow.from_record(rec)])
            return
        fresh = TimelineRow.from_record(rec)
        for name in TimelineRow.__slots__:
            setattr(row, name, getattr(fresh, name))
        self._changed(rec.id)

    def append_output(self, call_id: str, text: str) -> None:
        chunks = self._output.setdefault(call_id, [])
        if sum(map(len, chunks)) < _MAX_OUTPUT:
            chunks.append(text)
        self.outputAppended.emit(call_id, text)

    def output(self, call_id: str) -> str:
        return "".join(self._output.get(call_id, ()))

    def clear(self) -> None:
        self.beginResetModel()
        self._rows.clear()
        self._index.clear()
        self._pending.clear()
        self._output.clear()
        self.endResetModel()

    # lookup ------------------------------------------------------------------------------------
    def row_of(self, call_id: str) -> int:
        self._flush_if_pending(call_id)
        return self._index.get(call_id, -1)

    def row_at(self, row: int) -> TimelineRow:
        return self._rows[row]

    def get(self, call_id: str) -> TimelineRow | None:
        return self._find(call_id)

    def tools(self) -> list[str]:
        return sorted({r.name for r in self._rows})

    def _flush_if_pending(self, call_id: str) -> None:
        if self._pending and any(r.call_id == call_id for r in self._pending):
            self._flush.stop()
            self.flush()

    def _find(self, call_id: str) -> TimelineRow | None:
        i = self._index.get(call_id)
        if i is not None:
            return self._rows[i]
        for r in self._pending:
            if r.call_id == call_id:
                return r
        return None

    def _changed(self, call_id: str) -> None:
        i = self._index.get(call_id)
        if i is not None:
            self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.COLUMNS) - 1))
        self.rowChanged.emit(call_id)


_STATE_LABEL = STATE_LABEL


class TimelineFilter(QSortFilterProxyModel):
    """Filters rows by a set of states and by tool name."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._states: frozenset[str] | None = None
        self._tool: str | None = None

    def set_states(self, states: Iterable[str] | None) -> None:
        self._refilter(lambda: setattr(self, "_states", frozenset(states) if states else None))

    def set_tool(self, tool: str | None) -> None:
        self._refilter(lambda: setattr(self, "_tool", tool or None))

    def _refilter(self, change) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt 6.9+: invalidateRowsFilter is deprecated
            self.beginFilterChange()
            change()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            change()
            self.invalidateRowsFilter()

    def filterAcceptsRow(self, source_row: int, source_parent) -> bool:
        if self._states is None and self._tool is None:
            return True
        model: TimelineModel = self.sourceModel()
        row = model.row_at(source_row)
        if self._states is not None and row.state.value not in self._states:
            return False
        return self._tool is None or row.name == self._tool


STATE_FILTERS: dict[str, frozenset[str] | None] = {
    "All states": None,
    "Running": frozenset({"PENDING", "APPROVED", "EXECUTING"}),
    "Needs approval": frozenset({"APPROVAL_REQUIRED"}),
    "Done": frozenset({"COMPLETED"}),
    "Failed or denied": frozenset({"FAILED", "DENIED", "SEALED"}),
}


def render_call_details(row: TimelineRow, output: str = "", rec: ToolCallRecord | None = None) -> str:
    """HTML for the details pane: input, output, result, diff, audit trail with provenance, sandbox."""
    rec = rec or row.record
    e = html.escape
    parts = [
        f"<h3>{e(row.name)} <span style='color:{state_colour(row.state).name()}'>"
        f"{e(row.state.value)}{' · ' + e(row.outcome) if row.outcome else ''}</span></h3>",
        f"<p><small>call {e(row.call_id)}"
        + (f" · {e(format_duration(row.duration_ms))}" if row.duration_ms is not None else "")
        + (f" · exit {row.exit_code}" if row.exit_code is not None else "")
        + "</small></p>",
        "<h4>Input</h4>",
        f"<pre>{e(json.dumps(row.input, indent=2, ensure_ascii=False))}</pre>",
    ]
    if output:
        parts += ["<h4>Output</h4>", f"<pre>{e(output[-20_000:])}</pre>"]
    if rec is not None:
        result = rec.result or {}
        details = result.get("details") or {}
        diff = details.get("diff")
        if diff:
            parts += ["<h4>Diff</h4>", diff_html(diff)]
        text = "\n".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
        if text:
            parts += ["<h4>Result" + (" (error)" if rec.is_error else "") + "</h4>", f"<pre>{e(text[:20_000])}</pre>"]
        if rec.error:
            parts += ["<h4>Error</h4>", f"<pre>{e(rec.error)}</pre>"]
        if rec.provenance:
            parts.append("<h4>Why it was allowed or asked</h4><ul>")
            for p in rec.provenance:
                src = f" ({e(p.source)})" if p.source else ""
                parts.append(f"<li><b>{e(p.decision or '?')}</b> by {e(p.kind)}: <code>{e(p.detail)}</code>{src}</li>")
            parts.append("</ul>")
        if rec.trail:
            parts.append("<h4>Audit trail</h4><table cellspacing='0' cellpadding='2'>")
            for t in rec.trail:
                when = time.strftime("%H:%M:%S", time.localtime(t.at)) + f".{int(t.at % 1 * 1000):03d}"
                parts.append(
                    f"<tr><td>{when}</td><td><b>{e(t.state.value)}</b></td><td>{e(t.actor)}</td>"
                    f"<td>{e(t.note)}</td></tr>"
                )
            parts.append("</table>")
        if rec.sandbox:
            sb = rec.sandbox
            unsafe = " <b style='color:#d9363e'>UNSANDBOXED</b>" if sb.get("unsandboxed") else ""
            def val(k: str) -> str:
                return e(str(sb.get(k, "")))

            parts += [
                "<h4>Where it ran</h4>",
                f"<p>{val('engine')}{unsafe} · container <code>{val('container_id')[:12]}</code>"
                f"<br>image <code>{val('image')}</code><br>digest <code>{val('image_digest')}</code>"
                f"<br>network {val('network')}</p>",
            ]
    return "".join(parts)


def diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        colour = ""
        if line.startswith("+") and not line.startswith("+++"):
            colour = "#2f9e44"
        elif line.startswith("-") and not line.startswith("---"):
            colour = "#d9363e"
        elif line.startswith("@@"):
            colour = "#3b82c4"
        esc = html.escape(line)
        out.append(f"<span style='color:{colour}'>{esc}</span>" if colour else esc)
    return "<pre>" + "\n".join(out) + "</pre>"


class TimelineDock(QDockWidget):
    """The timeline table with its filters and a details pane for the selected call."""

    detailsRequested = Signal(str)  # call_id: the owner may fetch the full record from the store

    def __init__(self, model: TimelineModel, parent=None) -> None:
        super().__init__("Timeline", parent)
        self.setObjectName("TimelineDock")
        self.model = model
        self.proxy = TimelineFilter(self)
        self.proxy.setSourceModel(model)

        self.state_filter = QComboBox()
        self.state_filter.addItems(list(STATE_FILTERS))
        self.state_filter.currentTextChanged.connect(lambda t: self.proxy.set_states(STATE_FILTERS[t]))
        self.tool_filter = QComboBox()
        self.tool_filter.addItem("All tools")
        self.tool_filter.activated.connect(self._tool_chosen)
        self.tool_filter.installEventFilter(self)
        self.count_label = QLabel()

        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(22)
        self.view.setShowGrid(False)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        hh = self.view.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(False)
        hh.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        for col, width in ((0, 132), (1, 90), (3, 64), (4, 40)):
            self.view.setColumnWidth(col, width)
        self.view.selectionModel().currentRowChanged.connect(self._current_changed)

        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        self.details.setPlaceholderText("Select a call to see its input, output, diff and audit trail.")

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.state_filter)
        top.addWidget(self.tool_filter)
        top.addStretch(1)
        top.addWidget(self.count_label)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(self.details)
        split.setSizes([300, 200])
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(split)
        self.setWidget(body)

        self._current: str | None = None
        model.rowsInserted.connect(self._update_count)
        model.modelReset.connect(self._update_count)
        model.rowChanged.connect(self._row_changed)
        model.outputAppended.connect(self._output_appended)
        self._update_count()

    def eventFilter(self, obj, event) -> bool:
        # Refresh the tool list lazily, when the user opens it.
        if obj is self.tool_filter and event.type() == event.Type.MouseButtonPress:
            current = self.tool_filter.currentText()
            self.tool_filter.clear()
            self.tool_filter.addItems(["All tools", *self.model.tools()])
            self.tool_filter.setCurrentText(current)
        return super().eventFilter(obj, event)

    def _tool_chosen(self, i: int) -> None:
        text = self.tool_filter.itemText(i)
        self.proxy.set_tool(None if i == 0 else text)

    def _update_count(self, *_: object) -> None:
        self.count_label.setText(f"{self.model.rowCount()} calls")

    def select_call(self, call_id: str) -> bool:
        """Select (and scroll to) the row of `call_id`; clears filters that hide it."""
        src_row = self.model.row_of(call_id)
        if src_row < 0:
            return False
        idx = self.proxy.mapFromSource(self.model.index(src_row, 0))
        if not idx.isValid():
            self.state_filter.setCurrentIndex(0)
            self.proxy.set_tool(None)
            self.tool_filter.setCurrentIndex(0)
            idx = self.proxy.mapFromSource(self.model.index(src_row, 0))
        self.view.selectionModel().setCurrentIndex(
            idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        self.view.scrollTo(idx)
        bring_to_front(self)
        return True

    def current_call(self) -> str | None:
        return self._current

    def _current_changed(self, current: QModelIndex | QPersistentModelIndex, _prev=None) -> None:
        self._current = current.data(CallIdRole) if current.isValid() else None
        self._render()
        if self._current:
            self.detailsRequested.emit(self._current)

    def _row_changed(self, call_id: str) -> None:
        if call_id == self._current:
            self._render()

    def _output_appended(self, call_id: str, _text: str) -> None:
        if call_id == self._current:
            self._render()

    def _render(self) -> None:
        row = self.model.get(self._current) if self._current else None
        if row is None:
            self.details.clear()
            return
        bar = self.details.verticalScrollBar()
        at = bar.value()
        self.details.setHtml(render_call_details(row, self.model.output(row.call_id)))
        bar.setValue(at)
