"""The audit history window: every project's tool calls, paged lazily from the store."""

from ._model import HistoryModel, HistoryRow
from ._window import HistoryWindow

__all__ = ["HistoryModel", "HistoryRow", "HistoryWindow"]
