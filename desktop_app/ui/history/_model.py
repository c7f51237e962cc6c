"""The history's table model: lazy and paged. It asks the store for a count and the first page, then
pages in more as the view scrolls (canFetchMore/fetchMore), so a million records open as fast as a hundred.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal

from ...core import AgentDeskError, ToolCallState, summarize_input
from .._roles import Role
from .._rows import RowTableModel
from .._theme import format_duration, state_colour, state_icon

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
    page_key: tuple[float, int] | None = None  # the store's key for the page after this row

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
                   r.project_id, r.created_at, r.duration_ms, preview, getattr(r, "page_key", None))


def make_query(**kw: Any) -> Any:
    from ...store import AuditQuery  # the store package is imported when the history first opens

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
            return self._display(r, c)
        if role == Qt.ItemDataRole.DecorationRole and c == 1:
            return state_icon(r.state)
        if role == Qt.ItemDataRole.ForegroundRole and c == 1:
            return state_colour(r.state)
        if role == Role.CALL_ID:
            return r.id
        return None

    def _display(self, r: HistoryRow, c: int) -> str | None:
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
        # Keyset paging after the last row when the store gives keys: a deep page costs what the first does.
        key = self._rows[-1].page_key if self._rows else None
        kwargs = self.query_kwargs(offset, self.page) if key is None else {**self._filters, "after": key,
                                                                            "limit": self.page}
        try:
            rows = await self._page_fn()(make_query(**kwargs))
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
