"""The project settings' MCP tab: the servers with their status, where each runs, their tools with a switch
each, the failed server's stderr, and the grant of a relaxation a project server asks for. Live: it follows
McpServersChanged for its project."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from ...core import AgentDeskError, ConsentStatus, McpServerInfo, McpServersChanged, McpServerState, visible
from ...runtime import Consent
from .._bridge import EventBridge
from .._mcp import STATE_LABEL, where_html, where_label
from ._mcp_model import McpServersModel

_KEYS = ("mcp_disabled_servers", "mcp_disabled_tools")
_MAX_TAIL = 20_000  # characters of a stderr tail shown (its end: where the crash is)
_EXPAND_UP_TO = 30  # servers with more tools start folded

# What a grant lets the server do, said plainly: the person decides on this text.
GRANT_TEXT = {
    "sandbox": ("Let “{name}” run the command .agent-desk/mcp.json names in this project's sandbox, beside the "
                "agent: it can read and change the project's files as the agent's commands can, with no network."),
    "sandbox+network": ("Let “{name}” reach the network. It runs in a container of its own, under the "
                        "sandbox's other limits, but with network access: it could send what it reads to anyone."),
    "host": ("Let “{name}” run UNSANDBOXED on this machine, as you: it can read, change and delete every file "
             "you can, and reach the network."),
    "http": ("Let the desk connect to “{name}” over the network, at the URL .agent-desk/mcp.json names, sending "
             "it the headers the file asks for (keyring secrets included) and the arguments of every call."),
}
NOT_STARTED = "No session of this project is open: its MCP servers start with the first session."
NONE_CONFIGURED = ("No MCP servers. Add them to .agent-desk/mcp.json in the project (the mcpServers shape of "
                   "Claude Desktop, Claude Code and Cursor), or to your own in Settings › MCP servers.")


def _tail(text: str) -> str:
    if len(text) <= _MAX_TAIL:
        return text
    return f"[… {len(text) - _MAX_TAIL} earlier characters not shown]\n" + text[-_MAX_TAIL:]


class McpServersSection(QWidget):
    """Servers and tools (a tree of switches), and the selected server's details and grant."""

    def __init__(self, settings: dict[str, Any], servers: list[McpServerInfo] | None, project_dir: str = "",
                 parent=None, *, consents: list[Consent] | None = None,
                 reread: Callable[[], list[Consent]] | None = None) -> None:
        super().__init__(parent)
        self.model = McpServersModel(settings.get("mcp_disabled_servers") or (),
                                     settings.get("mcp_disabled_tools") or (), consents, self)
        self._reread = reread  # the project's MCP consents read again, for a server the tab did not know
        self.project_dir = project_dir
        self._initial = {k: settings.get(k) for k in _KEYS}
        self._project_id = ""
        self._bridge: EventBridge | None = None
        self._build()
        self.set_servers(servers)

    def _build(self) -> None:
        self.empty = QLabel()
        self.empty.setWordWrap(True)
        self.tree = QTreeView()
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)  # thousands of tools stay cheap to lay out
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col, width in ((1, 120), (2, 160), (3, 230)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, width)
        header.setStretchLastSection(False)
        self.tree.selectionModel().currentChanged.connect(lambda *_: self._show_selected())
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a server's name is data, never markup
        self.title.setWordWrap(True)
        self.where = QLabel()
        self.where.setTextFormat(Qt.TextFormat.RichText)  # built here from escaped text only
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setPlaceholderText("The error and the server's stderr show here when it fails.")
        self.grant = QCheckBox()
        self.grant.toggled.connect(self._grant_toggled)
        self.grant_text = QLabel()
        self.grant_text.setTextFormat(Qt.TextFormat.PlainText)
        self.grant_text.setWordWrap(True)
        self._lay_out()

    def _lay_out(self) -> None:
        details = QWidget()
        dl = QVBoxLayout(details)
        dl.setContentsMargins(0, 0, 0, 0)
        for w in (self.title, self.where, self.grant, self.grant_text):
            dl.addWidget(w)
        dl.addWidget(self.log, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(details)
        split.setSizes([300, 180])
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Servers from the project's <code>.agent-desk/mcp.json</code> and from your "
                             "settings (yours). Untick a server or a tool to switch it off."))
        lay.addWidget(self.empty)
        lay.addWidget(split, 1)

    # feeding -----------------------------------------------------------------------------------
    def follow(self, bridge: EventBridge, project_id: str) -> None:
        """Follow the project's McpServersChanged until `stop_following`."""
        self._project_id = project_id
        self._bridge = bridge
        bridge.mcpServersChanged.connect(self._on_changed)

    def stop_following(self) -> None:
        if self._bridge is not None:
            self._bridge.mcpServersChanged.disconnect(self._on_changed)
            self._bridge = None

    def _on_changed(self, ev: McpServersChanged) -> None:
        if ev.project_id != self._project_id:
            return
        try:
            self.set_servers([McpServerInfo.from_dict(d) for d in ev.servers])
        except (KeyError, TypeError, ValueError) as exc:
            self.empty.setText(f"⚠ The servers' report could not be read: {exc}")
            self.empty.show()

    def set_servers(self, servers: list[McpServerInfo] | None) -> None:
        """Show `servers` (None: not started yet), keeping the selected server and the person's switches."""
        current = self.model.server_at(self.tree.currentIndex())
        self.model.set_servers(servers or [])
        self.empty.setText(NOT_STARTED if servers is None else NONE_CONFIGURED)
        self.empty.setVisible(not servers)
        for row, s in enumerate(self.model.servers):
            if len(s.tools) <= _EXPAND_UP_TO:
                self.tree.expand(self.model.index(row, 0))
        row = self.model.server_row(current.name) if current else -1
        if row < 0 and self.model.servers:
            row = 0
        if row >= 0:
            self.tree.selectionModel().setCurrentIndex(
                self.model.index(row, 0), QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self._show_selected()

    # the selected server -----------------------------------------------------------------------
    def selected_server(self) -> McpServerInfo | None:
        return self.model.server_at(self.tree.currentIndex())

    def _show_selected(self) -> None:
        s = self.selected_server()
        for w in (self.title, self.where, self.log):
            w.setVisible(s is not None)
        if s is None:
            self._show_grant(None)
            return
        origin = "the project's .agent-desk/mcp.json" if s.source == "project" else "your settings"
        self.title.setText(visible(f"{s.name} — {self.model.status_text(s)} — from {origin}"
                                   + (f" — {s.version}" if s.version else "")))
        self.where.setText(f"Runs: {where_html(s.where.value)}")
        parts = [f"Error: {s.error}"] if s.error else []
        if s.stderr_tail:
            parts.append("stderr (its last lines):\n" + _tail(s.stderr_tail))
        self.log.setPlainText(visible(_tail("\n\n".join(parts))))
        self._show_grant(s)

    def _show_grant(self, s: McpServerInfo | None) -> None:
        asks = s is not None and s.source == "project"  # a repository's server, wherever it runs
        self.grant.setVisible(asks)
        self.grant_text.setVisible(asks)
        if not asks or s is None:
            return
        where = s.where.value
        consent = self.model.consents.get(s.name)
        self.grant.blockSignals(True)
        self.grant.setChecked(self.model.granted(s))
        self.grant.blockSignals(False)
        self.grant.setText(f"Grant: {where_label(where)}")
        text = GRANT_TEXT.get(where, "Let “{name}” run as " + where + ".").replace("{name}", visible(s.name))
        if s.name in self.model.decided:
            text += "\nApplied when you Save." if self.model.decided[s.name] else \
                "\nTaken back when you Save."
        elif consent is not None and consent.status is ConsentStatus.CHANGED:
            text += ("\nIts entry in .agent-desk/mcp.json changed since you granted it (where it runs, its "
                     "command, url or headers): read it again before you grant it again.")
        elif s.state == McpServerState.NEEDS_APPROVAL:
            text += f"\nIt is {STATE_LABEL['needs_approval']}: it does not start until you grant it and Save."
        self.grant_text.setText(text)
        self.grant_text.setStyleSheet("color: #d9363e" if where == "host" else "color: #d4890b")

    def _grant_toggled(self, on: bool) -> None:
        s = self.selected_server()
        if s is None:
            return
        if on and s.name not in self.model.consents and self._reread is not None:
            try:  # a server the file did not have when the tab read it: read it as it is now
                self.model.consents.update({c.name: c for c in self._reread()})
            except AgentDeskError:
                pass
        if on and s.name not in self.model.consents:  # the file does not have it (or cannot be read)
            self.grant.blockSignals(True)
            self.grant.setChecked(False)
            self.grant.blockSignals(False)
            self.grant_text.setText(f"⚠ Not granted: the server {s.name!r} is not in the project's "
                                    ".agent-desk/mcp.json as it was read; reopen the project settings.")
            return
        self.model.set_grant(s.name, on)
        self._show_grant(s)

    def decisions(self) -> list[tuple[Consent, bool]]:
        """The grants given (revoke False) or taken back (True) in this dialog, each bound to the entry as it
        was shown: applied on Save (an entry changed since is refused then, and said so)."""
        out = []
        for name, on in sorted(self.model.decided.items()):
            consent = self.model.consents.get(name)
            if consent is not None:
                out.append((consent, not on))
        return out

    # the result --------------------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The settings keys to save: each only when set now or set before (an untouched project keeps
        its settings equal, so its runtime is not rebuilt for nothing)."""
        now: dict[str, Any] = {"mcp_disabled_servers": sorted(self.model.disabled_servers),
                               "mcp_disabled_tools": sorted(self.model.disabled_tools)}
        return {k: v for k, v in now.items() if v or self._initial.get(k) is not None}
