"""The timeline's filter proxy: rows by a set of states and by tool name."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QSortFilterProxyModel

from ._model import TimelineModel

STATE_FILTERS: dict[str, frozenset[str] | None] = {
    "All states": None,
    "Running": frozenset({"PENDING", "APPROVED", "EXECUTING"}),
    "Needs approval": frozenset({"APPROVAL_REQUIRED"}),
    "Done": frozenset({"COMPLETED"}),
    "Failed or denied": frozenset({"FAILED", "DENIED", "SEALED"}),
}


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
