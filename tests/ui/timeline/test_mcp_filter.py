"""The timeline by MCP server: the servers seen in the session and "Built-in tools" in the dock's filter,
rows from live events and stored records, and the details of an MCP call (server, version, where it ran)."""

from __future__ import annotations

from desktop_app.core import (
    EventBus,
    McpServerInfo,
    McpServersChanged,
    McpServerState,
    McpToolInfo,
    McpWhere,
    MemoryStore,
    ToolCallState,
    ToolStart,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._mcp import McpDirectory
from desktop_app.ui._roles import Role
from desktop_app.ui.timeline import TimelineDock, TimelineModel, render_call_details
from tests.ui.helpers import make_record


def _mcp_record(i: int, server: str, tool: str, where: str = "sandbox"):
    rec = make_record(i, f"mcp__{server.replace('.', '_')}__{tool}")
    rec.input = {"repo_path": "/workspace"}
    rec.result = {"content": [{"type": "text", "text": "clean"}],
                  "details": {"mcp_server": server, "mcp_server_version": f"{server}-server 1.2", "mcp_where": where}}
    return rec


def _shown(dock: TimelineDock) -> set[str]:
    return {dock.proxy.index(r, 0).data(Role.CALL_ID) for r in range(dock.proxy.rowCount())}


def test_the_server_filter_lists_the_sessions_servers_and_filters_by_them(qtbot, qloop):
    model = TimelineModel()
    dock = TimelineDock(model)
    qtbot.addWidget(dock)
    combo = dock.server_filter
    assert [combo.itemText(i) for i in range(combo.count())] == ["All servers", "Built-in tools"]
    model.add_records([make_record(1), _mcp_record(2, "git", "git_status"), make_record(3, "fs_read"),
                       _mcp_record(4, "my.notes", "search", "host")])
    assert [combo.itemText(i) for i in range(combo.count())] == ["All servers", "Built-in tools", "MCP: git",
                                                                  "MCP: my.notes"]
    combo.setCurrentIndex(combo.findData("my.notes"))
    assert _shown(dock) == {"call_4"}
    combo.setCurrentIndex(1)
    assert _shown(dock) == {"call_1", "call_3"}
    combo.setCurrentIndex(0)
    assert len(_shown(dock)) == 4
    combo.setCurrentIndex(combo.findData("git"))
    assert dock.select_call("call_1") and combo.currentIndex() == 0  # selecting a hidden call clears it


def test_a_live_mcp_call_is_filed_under_its_servers_real_name(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    directory = McpDirectory()
    directory.attach(bridge)
    model = TimelineModel()
    model.attach(bridge, lambda: "ses_1")
    model.mcp_names = directory.call_name
    dock = TimelineDock(model)
    qtbot.addWidget(dock)
    info = McpServerInfo("my.notes", McpServerState.READY, McpWhere.HOST, "user",
                         tools=(McpToolInfo("my.notes", "search", read_only=True),))
    bus.publish(McpServersChanged(project_id="prj_1", servers=[info.to_dict()]))
    bus.publish(ToolStart(session_id="ses_1", call_id="c1", name="mcp__my_notes__search", input={"q": "x"}))
    bus.publish(ToolStart(session_id="ses_1", call_id="c2", name="bash_run", input={"command": "ls"}))
    qtbot.waitUntil(lambda: model.rowCount() == 2)
    assert model.servers() == ["my.notes"] and model.get("c2").server is None
    dock.server_filter.setCurrentIndex(dock.server_filter.findData("my.notes"))
    assert _shown(dock) == {"c1"}


def test_an_mcp_calls_details_show_server_version_and_where_it_ran():
    model = TimelineModel()
    rec = _mcp_record(7, "notes", "search", "host")
    model.add_records([rec])
    html = render_call_details(model.get("call_7"), rec=rec)
    assert "MCP server <b>notes</b> <small>notes-server 1.2</small>" in html
    assert "ran: <b style='color:#d9363e'>UNSANDBOXED (host)</b>" in html
    assert render_call_details(model.get("call_7"), rec=None).count("MCP server") == 1
    builtin = make_record(8)
    model.add_records([builtin])
    assert "MCP server" not in render_call_details(model.get("call_8"), rec=builtin)
    assert model.get("call_8").state is ToolCallState.COMPLETED
