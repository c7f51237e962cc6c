"""An MCP call in the inbox: the card names the server, where it runs and the tool's own name, shows the
arguments as key/value rows, and its risk as for any call; fed through the real bus and bridge."""

from __future__ import annotations

from desktop_app.core import (
    EventBus,
    McpServerInfo,
    McpServersChanged,
    McpServerState,
    McpToolInfo,
    McpWhere,
    MemoryStore,
    PermissionRequired,
    SessionInfo,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._mcp import McpDirectory
from desktop_app.ui.inbox import ApprovalInbox

ARGS = {"repo_path": "/workspace", "message": "Fix prices\n\nStrip every separator.", "amend": False,
        "paths": ["a.py", "b.py"]}


def _wired(qtbot):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    directory = McpDirectory()
    directory.attach(bridge)
    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    inbox.show()
    session = SessionInfo("ses_1", "prj_1", "fix prices")
    inbox.attach(bridge, lambda sid: session if sid == "ses_1" else None)
    inbox.mcp_names = directory.call_name
    return bus, inbox


def _ask(bus, name: str, risk: str = "medium") -> None:
    bus.publish(PermissionRequired(session_id="ses_1", call_id="c1", name=name, input=ARGS, risk=risk,
                                   reason=f"{name} has no hints (a write) and mode ask asks first"))


def test_an_mcp_card_shows_server_where_tool_and_arguments(qtbot, qloop):
    bus, inbox = _wired(qtbot)
    git = McpServerInfo("git", McpServerState.READY, McpWhere.SANDBOX, "project", "mcp-server-git 1.26.0",
                        (McpToolInfo("git", "git_commit"),))
    notes = McpServerInfo("my.notes", McpServerState.READY, McpWhere.HOST, "user",
                          tools=(McpToolInfo("my.notes", "append", destructive=True),))
    bus.publish(McpServersChanged(project_id="prj_1", servers=[git.to_dict(), notes.to_dict()]))
    _ask(bus, "mcp__git__git_commit")
    item = inbox.model.item(0)
    # labelled by its own name's words (no live server here to give its title), its server beside it
    assert item.title == "Git commit — MCP server git · sandbox"
    assert inbox.model.index(0).data().startswith("Git commit — MCP server git · sandbox: ")
    text = inbox.card.toPlainText()
    assert "Git commit · medium risk" in text and "MCP tool git_commit of server git (mcp-server-git 1.26.0)" in text
    assert "runs: sandbox" in text and "mcp__git__git_commit" in text
    # the arguments as key/value rows: each key beside its value, the message's lines whole
    assert "repo_path\n/workspace\n" in text and "amend\nfalse\n" in text
    assert "Strip every separator." in text and '"a.py"' in text
    html = inbox.card.toHtml()
    assert html.count("<tr>") >= len(ARGS)
    inbox.remove("c1")
    # a server whose name a tool name cannot hold: the real name comes from the report, and the host is loud
    bus.publish(PermissionRequired(session_id="ses_1", call_id="c2", name="mcp__my_notes__append", input={},
                                   risk="high", reason="destructive"))
    item = inbox.model.item(0)
    assert item.title == "Append — MCP server my.notes · UNSANDBOXED (host)"
    text = inbox.card.toPlainText()
    assert "Append · high risk" in text and "hint: destructive" in text and "UNSANDBOXED (host)" in text
    assert "no arguments" in text


def test_an_mcp_call_of_a_server_not_reported_yet_still_names_its_parts(qtbot, qloop):
    bus, inbox = _wired(qtbot)
    _ask(bus, "mcp__fetch__get", risk="low")
    item = inbox.model.item(0)
    assert item.title == "Get — MCP server fetch" and item.risk == "low"
    assert "runs: not reported yet" in inbox.card.toPlainText()
    bus.publish(PermissionRequired(session_id="ses_1", call_id="c3", name="bash_run", input={"command": "ls"}))
    assert inbox.model.item(1).title == "Run command" and inbox.model.item(1).mcp is None
