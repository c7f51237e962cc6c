"""The timeline dock: the filtered table of calls and a details pane for the selected one."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ...core import visible
from .._roles import Role
from .._rows import record_table
from .._theme import bring_to_front
from ._details import render_call_details
from ._filter import BUILTIN_TOOLS, STATE_FILTERS, TimelineFilter
from ._model import TimelineModel

WIDTHS = ((0, 132), (1, 90), (3, 64), (4, 40))  # the table's columns, but Input (which stretches)


class TimelineDock(QDockWidget):
    """The timeline table with its filters and a details pane for the selected call."""

    detailsRequested = Signal(str)  # call_id: its full record is fetched (TimelineModel.refresh)
    rewindRequested = Signal(str)  # call_id: "Rewind files to before this call" (the row's context menu)

    def __init__(self, model: TimelineModel, parent=None) -> None:
        super().__init__("Timeline", parent)
        self.setObjectName("TimelineDock")
        self.model = model
        # The view shows the model itself until a filter is first chosen: a filter proxy asks Python about
        # every inserted row, which would cost a session of 100k calls most of its load time.
        self.proxy = TimelineFilter(self)
        self._build_filters()
        self._build_view()
        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        self.details.setPlaceholderText("Select a call to see its input, output, diff and audit trail.")
        self._lay_out()

        self._current: str | None = None
        model.rowsInserted.connect(self._update_count)
        model.modelReset.connect(self._update_count)
        for signal in (model.rowsInserted, model.modelReset, model.rowChanged):
            signal.connect(self._update_servers)
        model.rowChanged.connect(self._row_changed)
        model.outputAppended.connect(self._output_appended)
        model.modelReset.connect(self._model_reset)  # another session: its calls, and no details yet
        self.detailsRequested.connect(model.refresh)
        self._update_count()

    def _build_filters(self) -> None:
        self.state_filter = QComboBox()
        self.state_filter.addItems(list(STATE_FILTERS))
        self.state_filter.currentTextChanged.connect(lambda t: self._filtered().set_states(STATE_FILTERS[t]))
        self.tool_filter = QComboBox()
        self.tool_filter.addItem("All tools")
        self.tool_filter.activated.connect(self._tool_chosen)
        self.tool_filter.installEventFilter(self)
        self.server_filter = QComboBox()
        self.server_filter.setToolTip("Only the calls to one MCP server, or only the built-in tools")
        self.server_filter.addItem("All servers", None)
        self.server_filter.addItem("Built-in tools", BUILTIN_TOOLS)
        self.server_filter.currentIndexChanged.connect(
            lambda i: self._filtered().set_server(self.server_filter.itemData(i)))
        self.count_label = QLabel()

    def _build_view(self) -> None:
        self.view = record_table(self.model, QAbstractItemView.SelectionMode.SingleSelection, stretch=2,
                                 widths=WIDTHS)
        self.view.selectionModel().currentRowChanged.connect(self._current_changed)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)

    def row_menu(self, index: QModelIndex) -> QMenu | None:
        """The menu of a row: rewind the files to before its call (asked in a dialog first)."""
        call_id = index.data(Role.CALL_ID) if index.isValid() else None
        if not call_id:
            return None
        menu = QMenu(self)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.addAction("Rewind files to before this call…", lambda: self.rewindRequested.emit(call_id))
        return menu

    def _context_menu(self, pos) -> None:
        menu = self.row_menu(self.view.indexAt(pos))
        if menu is not None:
            menu.popup(self.view.viewport().mapToGlobal(pos))

    def _filtered(self) -> TimelineFilter:
        """The filter proxy, put between the model and the view on first use (the selection kept)."""
        if self.proxy.sourceModel() is self.model:
            return self.proxy
        current, old = self.model.row_of(self._current) if self._current else -1, self.view.selectionModel()
        self.proxy.setSourceModel(self.model)
        self.view.setModel(self.proxy)  # a new selection model: connect it again
        old.deleteLater()
        for col, width in WIDTHS:
            self.view.setColumnWidth(col, width)
        self.view.selectionModel().currentRowChanged.connect(self._current_changed)
        if current >= 0:
            self.view.selectionModel().setCurrentIndex(
                self.proxy.mapFromSource(self.model.index(current, 0)),
                QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        return self.proxy

    def _shown_index(self, src_row: int) -> QModelIndex:
        index = self.model.index(src_row, 0)
        return self.proxy.mapFromSource(index) if self.view.model() is self.proxy else index

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        for box in (self.state_filter, self.tool_filter, self.server_filter):
            box.setMinimumWidth(64)  # whole where there is room; narrower at 1024 px, where the conversation has half
            top.addWidget(box)
        top.addStretch(1)
        # the count is in the dock's title too: on a narrow column the label gives way, not the conversation
        self.count_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        top.addWidget(self.count_label)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(self.details)
        split.setSizes([300, 200])
        split.setStretchFactor(0, 3)  # a short column keeps rows of the table before the details' lines
        split.setStretchFactor(1, 1)
        for w in (self.view, self.details):  # the column may go to waiting calls; it comes back when none wait
            w.setMinimumHeight(36)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(split)
        self.setWidget(body)

    def eventFilter(self, obj, event) -> bool:
        # Refresh the tool list lazily, when the user opens it.
        if obj is self.tool_filter and event.type() == event.Type.MouseButtonPress:
            current = self.tool_filter.currentText()
            self.tool_filter.clear()
            self.tool_filter.addItems(["All tools", *self.model.tools()])
            self.tool_filter.setCurrentText(current)
        return super().eventFilter(obj, event)

    def _update_servers(self, *_: object) -> None:
        """The servers seen in the session, kept in the list (the chosen one stays chosen)."""
        servers = self.model.servers()
        listed = [self.server_filter.itemData(i) for i in range(2, self.server_filter.count())]
        if listed == servers:
            return
        chosen = self.server_filter.currentData()
        self.server_filter.blockSignals(True)
        while self.server_filter.count() > 2:
            self.server_filter.removeItem(2)
        for name in servers:
            self.server_filter.addItem(visible(f"MCP: {name}"[:200]), name)
        at = self.server_filter.findData(chosen) if chosen is not None else 0
        self.server_filter.setCurrentIndex(max(0, at))
        self.server_filter.blockSignals(False)
        if at < 0:  # the chosen server is gone (another session): show every call again
            self._filtered().set_server(None)

    def _tool_chosen(self, i: int) -> None:
        text = self.tool_filter.itemText(i)
        self._filtered().set_tool(None if i == 0 else text)

    def _update_count(self, *_: object) -> None:
        n = self.model.rowCount()
        self.count_label.setText(f"{n} calls")
        self.setWindowTitle(f"Timeline · {n} call{'' if n == 1 else 's'}" if n else "Timeline")

    def select_call(self, call_id: str) -> bool:
        """Select (and scroll to) the row of `call_id`; clears filters that hide it."""
        src_row = self.model.row_of(call_id)
        if src_row < 0:
            return False
        idx = self._shown_index(src_row)
        if not idx.isValid():
            self.state_filter.setCurrentIndex(0)
            self.proxy.set_tool(None)
            self.tool_filter.setCurrentIndex(0)
            self.server_filter.setCurrentIndex(0)
            idx = self._shown_index(src_row)
        self.view.selectionModel().setCurrentIndex(
            idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        self.view.scrollTo(idx)
        bring_to_front(self)
        return True

    def current_call(self) -> str | None:
        return self._current

    def _current_changed(self, current: QModelIndex | QPersistentModelIndex, _prev=None) -> None:
        self._current = current.data(Role.CALL_ID) if current.isValid() else None
        self._render()
        if self._current:
            self.detailsRequested.emit(self._current)

    def _model_reset(self) -> None:
        self._current = None
        self._render()

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
