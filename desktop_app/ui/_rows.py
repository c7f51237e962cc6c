"""The part every table model of the window shares: a list of row objects and named columns."""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt


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
