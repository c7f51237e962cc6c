"""The timeline's filter proxy: rows by a set of states, by tool name and by MCP server."""

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


BUILTIN_TOOLS = ""  # the server filter's value for the desk's own tools (no MCP server)


class TimelineFilter(QSortFilterProxyModel):
    """Filters rows by a set of states, by tool name and by server (`BUILTIN_TOOLS`: the built-in tools)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._states: frozenset[str] | None = None
        self._tool: str | None = None
        self._server: str | None = None

    def set_states(self, states: Iterable[str] | None) -> None:
        self._refilter(lambda: setattr(self, "_states", frozenset(states) if states else None))

    def set_tool(self, tool: str | None) -> None:
        self._refilter(lambda: setattr(self, "_tool", tool or None))

    def set_server(self, server: str | None) -> None:
        """Only the calls to one MCP server (by its name), or `BUILTIN_TOOLS`; None: every call."""
        self._refilter(lambda: setattr(self, "_server", server))

    def _refilter(self, change) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt 6.9+: invalidateRowsFilter is deprecated
            self.beginFilterChange()
            change()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            change()
            self.invalidateRowsFilter()

    def filterAcceptsRow(self, source_row: int, source_parent) -> bool:
        if self._states is None and self._tool is None and self._server is None:
            return True
        model: TimelineModel = self.sourceModel()
        state, name, server = model.filter_facts(source_row)  # no row built for a record filtered out
        if self._states is not None and state not in self._states:
            return False
        if self._server is not None and (server or BUILTIN_TOOLS) != self._server:
            return False
        return self._tool is None or name == self._tool
