"""Tool labels and per-tool cards in the window (Qt offscreen): the timeline's rows say each tool's label and
its card's headline (the name in the tooltip), the details pane its fields and its result's; the inbox's list
and card title each call by its label and show the tool's own fields (a web fetch's URL and domain, a commit's
message and files); the history window over a real SQLite store lists labels too; a plugin's tool of an open
runtime is labelled as the plugin says, and an MCP tool of no open runtime from its name."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop_app.core import (
    EventBus,
    MemoryStore,
    Outcome,
    PermissionRequired,
    SessionInfo,
    ToolCallRecord,
    ToolCallState,
    ToolRegistry,
    tool,
)
from desktop_app.runtime import tool_labels
from desktop_app.runtime._plugins import PluginTool
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui.history import HistoryWindow
from desktop_app.ui.inbox import ApprovalInbox
from desktop_app.ui.timeline import TimelineModel
from desktop_app.ui.timeline._details import render_call_details


@tool(label="Resize images")
async def img_resize(folder: str, width: int = 800) -> str:
    """A plugin's tool with a label of its own."""
    return "done"


def ended(name: str, data: dict, result: dict, at: float = 0.0, i: int = 0) -> ToolCallRecord:
    rec = ToolCallRecord(name=name, input=data, id=f"call_{i:04d}", session_id="ses_1", project_id="prj_1",
                         created_at=1_750_000_000 + i)
    rec.transition(ToolCallState.EXECUTING, actor="executor", at=1_750_000_000 + i)
    rec.transition(ToolCallState.COMPLETED, actor="executor", outcome=Outcome.OK, at=1_750_000_000 + i + 0.2)
    rec.result = result
    return rec


BASH = ended("bash_run", {"command": "make test"}, {
    "content": [{"type": "text", "text": "exit 2"}],
    "details": {"exit_code": 2, "cwd": "/workspace", "stdout": "", "stderr": "make: *** [test] Error 2\n"}}, i=1)
EDIT = ended("fs_edit", {"path": "src/a.py", "old_string": "a = 1", "new_string": "a = 2"}, {
    "content": [{"type": "text", "text": "edited"}],
    "details": {"diff": "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"}}, i=2)
MCP = ended("mcp__tickets__list_open", {"team": "core"}, {"content": [{"type": "text", "text": "3 open"}]}, i=3)


def test_the_timeline_and_its_details_pane_say_labels_and_cards(qtbot) -> None:
    registry = ToolRegistry([PluginTool(img_resize, "imgtools", "1.2")])
    tool_labels().watch(registry)  # as an open project runtime's registry is
    model = TimelineModel()
    plugin = ended("img_resize", {"folder": "assets", "width": 400}, {"content": []}, i=4)
    model.add_records([BASH, EDIT, MCP, plugin])
    shown = [(model.index(r, 1).data(), model.index(r, 2).data()) for r in range(model.rowCount())]
    assert shown == [("Run command", "make test"), ("Edit file", "src/a.py"), ("List open (tickets)", "core"),
                     ("Resize images", "assets")]
    assert model.index(0, 1).data(Qt.ItemDataRole.ToolTipRole).startswith("Run command (bash_run): make test")
    html = render_call_details(model.row_at(0))
    assert "Run command <small><code>bash_run</code></small>" in html and "Summary: Run command: make test" in html
    for words in ("<b>Command</b>", "make test", "<b>Folder</b>", "<b>Exit</b>", ">2<", "make: *** [test] Error 2"):
        assert words in html, words
    edit = render_call_details(model.row_at(1))
    assert "<b>Changed</b>" in edit and "+1 -1 lines" in edit and "Summary: Edit file: src/a.py" in edit
    mcp = render_call_details(model.row_at(2))
    assert "<b>Server</b>" in mcp and "tickets" in mcp and "<b>Team</b>" in mcp


def _inbox(qtbot):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    inbox.show()
    session = SessionInfo("ses_1", "prj_1", "release")
    inbox.attach(bridge, lambda sid: session if sid == "ses_1" else None)
    return bus, inbox


def test_the_inbox_titles_each_call_by_its_label_and_shows_the_tools_fields(qtbot, qloop) -> None:
    bus, inbox = _inbox(qtbot)
    bus.publish(PermissionRequired(session_id="ses_1", call_id="w1", name="web_fetch", risk="medium",
                                   input={"url": "https://docs.python.org/3/library/?q=1", "format": "markdown"},
                                   reason="the network"))
    qtbot.waitUntil(lambda: inbox.model.rowCount() == 1)
    assert inbox.model.item(0).title == "Fetch web page"
    assert inbox.model.index(0).data() == "Fetch web page: https://docs.python.org/3/library/?q=1"
    inbox.list.setCurrentIndex(inbox.model.index(0))
    qtbot.waitUntil(lambda: "Domain" in inbox.card.toPlainText())
    text = inbox.card.toPlainText()
    assert text.startswith("Fetch web page web_fetch · medium risk")
    assert "Fetch web page: https://docs.python.org/3/library/?q=1" in text
    assert "URL\nhttps://docs.python.org/3/library/?q=1\nDomain\ndocs.python.org\nAs\nmarkdown" in text
    bus.publish(PermissionRequired(session_id="ses_1", call_id="g1", name="git_commit", risk="medium",
                                   input={"message": "Release 1.2\n\nNotes.", "paths": ["CHANGES.md", "setup.py"]},
                                   reason="writes the repository"))
    qtbot.waitUntil(lambda: inbox.model.rowCount() == 2)
    row = next(r for r in range(2) if inbox.model.item(r).call_id == "g1")
    assert inbox.model.item(row).title == "Commit changes"
    inbox.list.setCurrentIndex(inbox.model.index(row))
    qtbot.waitUntil(lambda: "Commit changes: Release 1.2 Notes." in inbox.card.toPlainText())
    assert "Message\nRelease 1.2\n\nNotes.\nFiles\nCHANGES.md, setup.py" in inbox.card.toPlainText()
    bus.publish(PermissionRequired(session_id="ses_1", call_id="b1", name="bash_run", risk="high",
                                   input={"command": "rm -rf build"}, reason="deletes"))
    qtbot.waitUntil(lambda: inbox.model.rowCount() == 3)
    row = next(r for r in range(3) if inbox.model.item(r).call_id == "b1")
    inbox.list.setCurrentIndex(inbox.model.index(row))
    qtbot.waitUntil(lambda: "rm -rf build" in inbox.card.toPlainText())
    assert "Run command bash_run · high risk" in inbox.card.toPlainText()
    assert "in /workspace" in inbox.card.toPlainText()  # the folder it runs in, beside the command


def test_the_history_window_lists_labels(qtbot, run, store) -> None:
    for rec in (BASH, EDIT, MCP):
        for entry in rec.trail:
            run(store.save_transition(rec, entry))
    run(store.flush())
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    run(win.refresh())
    assert win.model.total == 3
    rows = [(win.model.index(r, 2).data(), win.model.index(r, 3).data()) for r in range(3)]
    assert rows == [("List open (tickets)", "core"), ("Edit file", "src/a.py"), ("Run command", "make test")]
    assert win.model.index(2, 2).data(Qt.ItemDataRole.ToolTipRole) == "bash_run"
