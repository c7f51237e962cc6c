"""The history's table model: lazy and paged. It asks the store for a count and the first page, then
pages in more as the view scrolls (canFetchMore/fetchMore), so a million records open as fast as a hundred.
Only the few pages around what the view last read are held: a page scrolled far away is dropped and fetched
again by its key when the view comes back, so paging through a million records keeps the memory flat.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal

from ...core import AgentDeskError, ToolCallState, status_word, visible
from .._call_labels import call_headline, call_label
from .._roles import Role
from .._rows import RowTableModel
from .._theme import format_duration, state_colour, state_icon

PAGE = 500
KEEP_PAGES = 6  # pages held at most: a screen of rows spans two


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
    label: str = ""  # the tool's human label ("Run command")

    @classmethod
    def of(cls, r: Any) -> HistoryRow:
        """From a store RecordRow (input_preview) or a full ToolCallRecord (input)."""
        preview = getattr(r, "input_preview", None)
        if preview is None:
            preview = call_headline(r.name, getattr(r, "input", {}) or {})
        else:
            try:
                preview = call_headline(r.name, json.loads(preview))
            except (ValueError, TypeError):  # a preview cut short: its text, as stored
                preview = visible(" ".join(str(preview).split())[:120])
        outcome = getattr(r, "outcome", None)
        return cls(r.id, r.name, ToolCallState(r.state), getattr(outcome, "value", outcome), r.session_id,
                   r.project_id, r.created_at, r.duration_ms, preview, getattr(r, "page_key", None),
                   call_label(r.name))


def make_query(**kw: Any) -> Any:
    from ...runtime import audit_query  # the store package is imported when the history first opens

    return audit_query(**kw)


class HistoryModel(RowTableModel):
    """Lazy, paged view of `store.query(AuditQuery)`, newest first, holding at most `keep` pages."""

    COLUMNS = ("Time", "State", "Tool", "Input", "Duration", "Session")
    loaded = Signal(int, int)  # rows paged in so far, total
    failed = Signal(str)

    def __init__(self, store: Any = None, parent=None, page: int = PAGE, keep: int = KEEP_PAGES) -> None:
        super().__init__(parent)
        self.store = store
        self.page = page
        self.keep = max(2, keep)
        self.total = 0
        self._count = 0  # rows paged in so far: the model's rowCount
        self._pages: OrderedDict[int, list[HistoryRow]] = OrderedDict()  # the pages held, by number
        self._ends: list[tuple[float, int] | None] = []  # page n's last key: where page n + 1 starts
        self._loading: dict[int, asyncio.Task] = {}  # pages on their way (fetchMore's is the next one)
        self._focus = 0  # the page the view read last: the pages kept are the ones nearest to it
        self._filters: dict[str, Any] = {}
        self._generation = 0
        self.project_names: dict[str, str] = {}
        self.session_names: dict[str, str] = {}

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self._count

    def rows_held(self) -> int:
        """How many records the model holds now (at most `keep` pages, whatever was paged through)."""
        return sum(map(len, self._pages.values()))

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < self._count):
            return None
        r = self._held(index.row())
        if r is None:
            return None  # on its way: dataChanged follows
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(r, c)
        if role == Qt.ItemDataRole.DecorationRole and c == 1:
            return state_icon(r.state, outcome=r.outcome)
        if role == Qt.ItemDataRole.ForegroundRole and c == 1:
            return state_colour(r.state, r.outcome)
        if role == Qt.ItemDataRole.ToolTipRole and c == 2:
            return r.name  # the tool's own name beside its label
        if role == Role.CALL_ID:
            return r.id
        return None

    def _display(self, r: HistoryRow, c: int) -> str | None:
        if c == 0:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at))
        if c == 1:
            return status_word(r.state, r.outcome)
        if c == 2:
            return r.label or r.name
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
        for task in self._loading.values():
            task.cancel()
        self.beginResetModel()
        self._loading, self._pages, self._ends, self._count, self.total, self._focus = {}, OrderedDict(), [], 0, 0, 0
        self.endResetModel()
        if self.store is None:
            self.loaded.emit(0, 0)
            return
        try:
            count_q = make_query(**self.query_kwargs(0, None))
            total, rows = await asyncio.gather(self.store.count(count_q), self._page_fn()(self._page_query(0)))
        except AgentDeskError as exc:
            self.failed.emit(exc.user_message())
            return
        if gen != self._generation:
            return
        self.total = int(total)
        self._paged_in(0, [HistoryRow.of(r) for r in rows])

    def _page_fn(self):
        # light rows (no payloads, no trails) when the store has them: a page costs one small SELECT
        return getattr(self.store, "list_records", None) or self.store.query

    def _page_query(self, n: int) -> Any:
        """Page n: after the key that ends page n - 1 (keyset: a deep page costs what the first does), or
        at its offset with a store that gives no keys."""
        key = self._ends[n - 1] if 0 < n <= len(self._ends) else None
        if key is None:
            return make_query(**self.query_kwargs(n * self.page, self.page))
        return make_query(**{**self._filters, "after": key, "limit": self.page})

    def canFetchMore(self, parent=QModelIndex()) -> bool:
        return not parent.isValid() and self._count < self.total and len(self._ends) not in self._loading

    def fetchMore(self, parent=QModelIndex()) -> None:
        if self.canFetchMore(parent):
            self._load(len(self._ends))

    def _load(self, n: int) -> None:
        if n not in self._loading:
            self._loading[n] = asyncio.ensure_future(self._fetch_page(self._generation, n))

    async def _fetch_page(self, gen: int, n: int) -> None:
        try:
            rows = await self._page_fn()(self._page_query(n))
        except AgentDeskError as exc:
            self.failed.emit(exc.user_message())
            rows = []
        finally:
            if gen == self._generation:
                self._loading.pop(n, None)
        if gen != self._generation:
            return
        if n == len(self._ends):
            self._paged_in(n, [HistoryRow.of(r) for r in rows])
            if not rows:
                self.total = self._count  # the store shrank under us
        elif rows:  # a page scrolled away and back: the same rows again, by the same key
            self._hold(n, [HistoryRow.of(r) for r in rows])
            first = n * self.page
            self.dataChanged.emit(self.index(first, 0), self.index(first + len(rows) - 1, len(self.COLUMNS) - 1))

    def _paged_in(self, n: int, rows: list[HistoryRow]) -> None:
        """The next page, new to the view: its rows are inserted at the end."""
        if rows:
            self.beginInsertRows(QModelIndex(), self._count, self._count + len(rows) - 1)
            self._ends.append(rows[-1].page_key)
            self._count += len(rows)
            self._focus = n
            self._hold(n, rows)
            self.endInsertRows()
        self.loaded.emit(self._count, self.total)

    def _hold(self, n: int, rows: list[HistoryRow]) -> None:
        """Keep page n; drop the pages farthest from the one the view read last, down to `keep`."""
        self._pages[n] = rows
        while len(self._pages) > self.keep:
            far = max((p for p in self._pages if p != n), key=lambda p: abs(p - self._focus))
            del self._pages[far]

    def _held(self, i: int) -> HistoryRow | None:
        n, k = divmod(i, self.page)
        self._focus = n
        rows = self._pages.get(n)
        if rows is None:
            self._load(n)
            return None
        return rows[k] if k < len(rows) else None

    def row(self, i: int) -> HistoryRow:
        """Row i, when its page is held (the view's rows and those near them); LookupError otherwise."""
        if not 0 <= i < self._count:
            raise IndexError(f"row {i} is not in the history's {self._count} rows")
        rows = self._pages.get(i // self.page)
        if rows is None or i % self.page >= len(rows):
            raise LookupError(f"row {i} is not held now (scrolled away); use rows() to fetch it")
        return rows[i % self.page]

    async def rows(self, indices: list[int]) -> list[HistoryRow]:
        """Rows by number, held or not: a page scrolled away is fetched again (and not kept)."""
        out: list[HistoryRow] = []
        fetched: dict[int, list[HistoryRow]] = {}
        for i in indices:
            n, k = divmod(i, self.page)
            page = self._pages.get(n) or fetched.get(n)
            if page is None:
                page = fetched[n] = [HistoryRow.of(r) for r in await self._page_fn()(self._page_query(n))]
            if k < len(page):
                out.append(page[k])
        return out

    @property
    def filters(self) -> dict[str, Any]:
        return dict(self._filters)
