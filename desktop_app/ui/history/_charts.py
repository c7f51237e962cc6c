"""The history's charts tab: the store aggregates (on its reader thread), the SVG is written on a worker thread,
and only the drawing happens on the GUI thread, so the window never blocks. A newer search drops older results."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from PySide6.QtCore import QByteArray, QSize, Qt, Signal
from PySide6.QtSvgWidgets import QSvgWidget
from PySide6.QtWidgets import QGridLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from ...core import AgentDeskError
from ...runtime import Chart, build_charts
from ._model import make_query

COLUMNS = 2


class ChartView(QSvgWidget):
    """One chart, its width shared with its neighbour and its height kept to the SVG's proportions."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.chart: Chart | None = None

    def show_chart(self, chart: Chart) -> None:
        self.chart = chart
        self.load(QByteArray(chart.svg.encode("utf-8")))
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        self.setAccessibleName(chart.title)
        self.setToolTip(chart.title)
        self.updateGeometry()

    def _ratio(self) -> float:
        size = self.renderer().defaultSize()
        return size.height() / size.width() if size.width() > 0 else 0.45

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return int(width * self._ratio())

    def sizeHint(self) -> QSize:
        return QSize(520, int(520 * self._ratio()))


class HistoryCharts(QScrollArea):
    """The charts of what the history's filters find (loaded when shown; again on each search)."""

    loaded = Signal(float)  # ms from the ask to the charts drawn
    failed = Signal(str)

    def __init__(self, store: Any = None, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("HistoryCharts")
        self.store = store
        self.setWidgetResizable(True)
        self.project_names: dict[str, str] = {}
        self.data: Any = None  # the store's ChartData of the last load
        self.charts: list[Chart] = []
        self.filters: dict[str, Any] | None = None  # what the charts show; None before the first load
        self._generation = 0
        body = QWidget()
        lay = QVBoxLayout(body)
        self.note = QLabel("Days are UTC days. The cost follows the period, project and session only.")
        self.note.setStyleSheet("color: #57606a")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        self.grid = QGridLayout()
        lay.addLayout(self.grid)
        lay.addStretch(1)
        self.views: list[ChartView] = []
        self.setWidget(body)

    def _views(self, n: int) -> list[ChartView]:
        while len(self.views) < n:
            view = ChartView()
            i = len(self.views)
            self.grid.addWidget(view, i // COLUMNS, i % COLUMNS)
            self.views.append(view)
        return self.views

    async def load(self, filters: dict[str, Any]) -> list[Chart]:
        """Aggregate, write and draw the charts of `filters` (the history's own). A failure is said, not raised."""
        self._generation += 1
        gen, started = self._generation, time.perf_counter()
        self.filters = dict(filters)
        if self.store is None:
            return []
        try:
            q = make_query(**{k: v for k, v in filters.items() if v not in (None, "", [])}, limit=None)
            data = await self.store.chart_data(q)
            charts = await asyncio.get_running_loop().run_in_executor(None, build_charts, data,
                                                                      dict(self.project_names))
        except AgentDeskError as exc:
            self.failed.emit(exc.user_message())
            return []
        if gen != self._generation:
            return []  # a newer search's charts are on their way
        self.data, self.charts = data, charts
        for view, chart in zip(self._views(len(charts)), charts, strict=False):
            view.show_chart(chart)
        self.loaded.emit((time.perf_counter() - started) * 1000.0)
        return charts

    def chart(self, key: str) -> Chart | None:
        return next((c for c in self.charts if c.key == key), None)
