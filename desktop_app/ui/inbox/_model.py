"""The inbox's list model: pending approvals, oldest first, indexed by call id, with a countdown tick."""

from __future__ import annotations

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, QTimer

from .._call_labels import call_headline
from .._roles import Role
from ._items import PendingApproval


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
            return f"{item.title}: {call_headline(item.name, item.input)}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{item.title} ({item.risk} risk)\n{item.why}"
        if role == Role.ITEM:
            return item
        if role == Role.CALL_ID:
            return item.call_id
        return None

    def add(self, item: PendingApproval) -> bool:
        """Add a waiting call; a call offered again (an edit that asks once more) replaces its card."""
        i = self.row_of(item.call_id)
        if i >= 0:
            self._items[i] = item
            self.dataChanged.emit(self.index(i), self.index(i))
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
