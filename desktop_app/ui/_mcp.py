"""What the window knows of each project's MCP servers (the last McpServersChanged, or the runtime's list),
and how a server's place and state are said, so the settings, the inbox and the timeline agree."""

from __future__ import annotations

import html
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from ..core import McpServerInfo, McpServersChanged, McpToolInfo, split_mcp_tool_name
from ._bridge import EventBridge

log = logging.getLogger(__name__)

# Where a server runs, said as loudly as the local sandbox's UNSANDBOXED mark for the host.
WHERE_LABEL = {
    "sandbox": "sandbox",
    "sandbox+network": "sandbox + network",
    "host": "UNSANDBOXED (host)",
    "http": "network (HTTP)",
}
WHERE_COLOUR = {"sandbox": "#2f9e44", "sandbox+network": "#d4890b", "host": "#d9363e", "http": "#d4890b"}
STATE_LABEL = {
    "starting": "starting…", "ready": "ready", "failed": "failed", "restarting": "restarting…",
    "disabled": "switched off", "needs_approval": "needs your grant",
}
STATE_COLOUR = {"starting": "#3b82c4", "ready": "#2f9e44", "failed": "#d9363e", "restarting": "#3b82c4",
                "disabled": "#8a8f98", "needs_approval": "#d4890b"}


RUNS = {"sandbox": "in the project's sandbox",
        "sandbox+network": "in a sandbox whose network goes through the desk's proxy (listed domains only; "
                           "anything else is asked about)",
        "host": "UNSANDBOXED on your computer", "http": "over the network (HTTP)"}


def runs_where(where: str) -> str:
    """Where a server runs, as the end of "it runs …"."""
    return RUNS.get(where, f"as {where}")


def where_label(where: str) -> str:
    return WHERE_LABEL.get(where, where or "?")


def where_html(where: str) -> str:
    """The place as coloured HTML; the host is bold, like the local sandbox's mark."""
    colour = WHERE_COLOUR.get(where, "#8a8f98")
    text = html.escape(where_label(where))
    return f"<b style='color:{colour}'>{text}</b>" if where == "host" else f"<span style='color:{colour}'>{text}</span>"


@dataclass(slots=True, frozen=True)
class McpCallName:
    """An MCP tool call's parts as the person should read them: the server's and the tool's own names."""

    server: str
    tool: str
    where: str = ""  # "" when the window has not seen the server
    version: str = ""
    read_only: bool = False
    destructive: bool = False


class McpDirectory(QObject):
    """Each project's servers as last reported; `changed(project_id)` after every report."""

    changed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._servers: dict[str, list[McpServerInfo]] = {}
        self._tools: dict[str, dict[str, tuple[McpServerInfo, McpToolInfo]]] = {}

    def attach(self, bridge: EventBridge) -> None:
        bridge.mcpServersChanged.connect(self._on_changed)

    def _on_changed(self, ev: McpServersChanged) -> None:
        try:
            servers = [McpServerInfo.from_dict(d) for d in ev.servers]
        except (KeyError, TypeError, ValueError) as exc:  # a malformed report must not break the window
            log.warning("ignored a malformed MCP servers report: %s", exc)
            return
        self.set_servers(ev.project_id, servers)

    def set_servers(self, project_id: str, servers: Iterable[McpServerInfo]) -> None:
        listed = list(servers)
        self._servers[project_id] = listed
        self._tools[project_id] = {t.desk_name: (s, t) for s in listed for t in s.tools}
        self.changed.emit(project_id)

    def servers(self, project_id: str) -> list[McpServerInfo] | None:
        """The last report for the project; None when none came (no session of it opened yet)."""
        found = self._servers.get(project_id)
        return list(found) if found is not None else None

    def call_name(self, desk_name: str, project_id: str = "") -> McpCallName | None:
        """The server and tool behind `mcp__s__t` (the project's report first, then any project's; else the
        name's own parts, which lose what a tool name cannot hold); None for a built-in tool."""
        split = split_mcp_tool_name(desk_name)
        if split is None:
            return None
        tables = [self._tools.get(project_id, {})] + [t for p, t in self._tools.items() if p != project_id]
        for table in tables:
            found = table.get(desk_name)
            if found is not None:
                s, t = found
                return McpCallName(s.name, t.name, s.where.value, s.version, t.read_only, t.destructive)
        return McpCallName(*split)
