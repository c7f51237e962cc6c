"""The project's MCP servers as a Qt tree model: a server per row with its tools under it, each with the
person's switch (a check box), its status, where it runs and its hints."""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtGui import QColor, QFont

from ...core import ConsentStatus, McpServerInfo, McpServerState, McpToolInfo, visible
from ...runtime import Consent
from .._mcp import STATE_COLOUR, STATE_LABEL, WHERE_COLOUR, where_label

_SERVER = 0  # internalId of a server row; a tool row's is its server's row + 1
_MAX_NAME = 200  # characters of a name shown in a cell (the details show it whole)


def _short(text: str) -> str:
    """A name or version as a cell shows it: cut, and with bidi overrides and controls written as escapes."""
    text = text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 1] + "…"
    return visible(text.replace("\n", " "))


def tool_hints(tool: McpToolInfo) -> str:
    """The tool's hints as the policy reads them: no hint is a write of medium risk."""
    if tool.destructive:
        return "destructive (high risk)"
    return "read-only" if tool.read_only else "may write (no hints)"


class McpServersModel(QAbstractItemModel):
    """Servers and their tools; the check boxes are the person's switches, kept here until saved."""

    COLUMNS = ("Server / tool", "Status", "Runs", "Version / hints")

    def __init__(self, disabled_servers=(), disabled_tools=(), consents: list[Consent] | None = None,
                 parent=None) -> None:
        super().__init__(parent)
        self.servers: list[McpServerInfo] = []
        self.disabled_servers: set[str] = set(disabled_servers)
        self.disabled_tools: set[str] = set(disabled_tools)
        # the project's servers that ask for a relaxation, each against the person's approval, as read
        self.consents: dict[str, Consent] = {c.name: c for c in consents or ()}
        self.decided: dict[str, bool] = {}  # grants given (True) or taken back in this dialog, applied on Save

    def set_servers(self, servers: list[McpServerInfo]) -> None:
        self.beginResetModel()
        self.servers = list(servers)
        self.endResetModel()

    # structure ---------------------------------------------------------------------------------
    def index(self, row: int, column: int, parent=QModelIndex()) -> QModelIndex:
        if not (0 <= column < len(self.COLUMNS)) or row < 0:
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, _SERVER) if row < len(self.servers) else QModelIndex()
        if parent.internalId() == _SERVER and row < len(self.servers[parent.row()].tools):
            return self.createIndex(row, column, parent.row() + 1)
        return QModelIndex()

    def parent(self, index=QModelIndex()) -> QModelIndex:
        if not index.isValid() or index.internalId() == _SERVER:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, _SERVER)

    def rowCount(self, parent=QModelIndex()) -> int:
        if not parent.isValid():
            return len(self.servers)
        if parent.column() != 0 or parent.internalId() != _SERVER:
            return 0
        return len(self.servers[parent.row()].tools)

    def columnCount(self, parent=QModelIndex()) -> int:
        return len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section]
        return None

    def server_at(self, index: QModelIndex) -> McpServerInfo | None:
        if not index.isValid():
            return None
        row = index.row() if index.internalId() == _SERVER else index.internalId() - 1
        return self.servers[row] if row < len(self.servers) else None

    def server_row(self, name: str) -> int:
        return next((i for i, s in enumerate(self.servers) if s.name == name), -1)

    # data --------------------------------------------------------------------------------------
    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        if index.internalId() == _SERVER:
            return self._server_data(self.servers[index.row()], index.column(), role)
        server = self.servers[index.internalId() - 1]
        return self._tool_data(server, server.tools[index.row()], index.column(), role)

    def server_on(self, server: McpServerInfo) -> bool:
        return server.name not in self.disabled_servers

    def status_text(self, server: McpServerInfo) -> str:
        if not self.server_on(server):
            return "switched off" + (" (saved when you Save)" if server.state != McpServerState.DISABLED else "")
        if server.state == McpServerState.NEEDS_APPROVAL and self.granted(server):
            return "granted: starts when you Save"
        return STATE_LABEL.get(server.state.value, server.state.value)

    def _server_data(self, s: McpServerInfo, col: int, role: int):
        if role == Qt.ItemDataRole.DisplayRole:
            return (_short(s.name) + ("" if s.source == "project" else "  (yours)"), self.status_text(s),
                    where_label(s.where.value), self._version_text(s))[col]
        if role == Qt.ItemDataRole.CheckStateRole and col == 0:
            return Qt.CheckState.Checked if self.server_on(s) else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ForegroundRole and col == 1:
            return QColor(STATE_COLOUR.get(s.state.value, "#8a8f98"))
        if role == Qt.ItemDataRole.ForegroundRole and col == 2:
            return QColor(WHERE_COLOUR.get(s.where.value, "#8a8f98"))
        if role == Qt.ItemDataRole.FontRole and col in (0, 2) and (col == 0 or s.where.value == "host"):
            bold = QFont()
            bold.setBold(True)
            return bold
        if role == Qt.ItemDataRole.ToolTipRole:
            origin = "the project" if s.source == "project" else "your settings"
            return f"{visible(s.name)}\n{where_label(s.where.value)} · from {origin}"
        return None

    @staticmethod
    def _version_text(s: McpServerInfo) -> str:
        n = len(s.tools)
        return f"{_short(s.version) or '–'} · {n} tool{'s' if n != 1 else ''}"

    def _tool_data(self, s: McpServerInfo, t: McpToolInfo, col: int, role: int):
        if role == Qt.ItemDataRole.DisplayRole:
            return (_short(t.name), "on" if self.tool_on(s, t) else "off", "", tool_hints(t))[col]
        if role == Qt.ItemDataRole.CheckStateRole and col == 0:
            return Qt.CheckState.Checked if t.desk_name not in self.disabled_tools else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ForegroundRole and col == 3 and t.destructive:
            return QColor("#d9363e")
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{t.desk_name}\n{visible(t.description[:2000])}"
        return None

    def tool_on(self, s: McpServerInfo, t: McpToolInfo) -> bool:
        return self.server_on(s) and t.desk_name not in self.disabled_tools

    # the switches ------------------------------------------------------------------------------
    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsSelectable
        s = self.server_at(index)
        if index.internalId() == _SERVER or (s is not None and self.server_on(s)):
            flags |= Qt.ItemFlag.ItemIsEnabled  # a switched-off server's tools are greyed
        if index.column() == 0:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def setData(self, index, value, role=Qt.ItemDataRole.EditRole) -> bool:
        if not index.isValid() or index.column() != 0 or role != Qt.ItemDataRole.CheckStateRole:
            return False
        on = Qt.CheckState(value) == Qt.CheckState.Checked
        if index.internalId() == _SERVER:
            name = self.servers[index.row()].name
            (self.disabled_servers.discard if on else self.disabled_servers.add)(name)
            self._changed_server(index.row())
        else:
            desk = self.servers[index.internalId() - 1].tools[index.row()].desk_name
            (self.disabled_tools.discard if on else self.disabled_tools.add)(desk)
            self.dataChanged.emit(index.siblingAtColumn(0), index.siblingAtColumn(len(self.COLUMNS) - 1))
        return True

    def granted(self, server: McpServerInfo) -> bool:
        """Granted for its entry as it is: given in this dialog, or approved before and unchanged since (an
        entry the repository changed, its command, url or headers, is not granted)."""
        if server.name in self.decided:
            return self.decided[server.name]
        consent = self.consents.get(server.name)
        return consent is not None and consent.status is ConsentStatus.APPROVED

    def set_grant(self, name: str, on: bool) -> None:
        """The person granted (or took back) `name`'s relaxation: applied on Save."""
        consent = self.consents.get(name)
        if consent is not None and on == (consent.status is ConsentStatus.APPROVED):
            self.decided.pop(name, None)  # back to what it was: nothing to apply
        else:
            self.decided[name] = on
        row = self.server_row(name)
        if row >= 0:
            self._changed_server(row)

    def _changed_server(self, row: int) -> None:
        last = len(self.COLUMNS) - 1
        self.dataChanged.emit(self.index(row, 0), self.index(row, last))
        n = len(self.servers[row].tools)
        if n:
            parent = self.index(row, 0)
            self.dataChanged.emit(self.index(0, 0, parent), self.index(n - 1, last, parent))
