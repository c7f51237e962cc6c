"""What the window's record tables share: a model over a list of row objects with named columns, and the
compact, row-selecting view that shows them (timeline and history)."""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QAbstractItemModel, QAbstractTableModel, QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView


class RowTableModel(QAbstractTableModel):
    """A flat table over `self._rows` with the headers in COLUMNS; subclasses supply data()."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    _rows: list[Any]

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            if 0 <= section < len(self.COLUMNS):
                return self.COLUMNS[section]
        return None


def record_table(model: QAbstractItemModel, selection: QAbstractItemView.SelectionMode, *, stretch: int,
                 widths: tuple[tuple[int, int], ...]) -> QTableView:
    """A table of records: whole rows selected, 22 px rows, no grid, column `stretch` takes the rest."""
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(selection)
    view.verticalHeader().hide()
    view.verticalHeader().setDefaultSectionSize(22)
    view.setShowGrid(False)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.horizontalHeader().setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    for col, width in widths:
        view.setColumnWidth(col, width)
    return view
