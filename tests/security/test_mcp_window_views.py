"""Attacks on the window's MCP views: names, versions and stderr that carry markup or bidi overrides are
shown as text; a huge stderr tail or tool list does not hold up the event loop; a server that runs on the
host is marked UNSANDBOXED whoever configured it, and only a project's server asks for a grant, which does
not carry over to a bigger relaxation."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt

from desktop_app.config import Settings
from desktop_app.core import (
    ConsentKind,
    ConsentStatus,
    EventBus,
    McpServerInfo,
    McpServersChanged,
    McpServerState,
    McpToolInfo,
    McpWhere,
    MemoryStore,
    PermissionRequired,
    ProjectInfo,
    SessionInfo,
    mcp_tool_name,
)
from desktop_app.runtime import approve, consents, settle_after_startup
from desktop_app.runtime._consent import mcp_consented
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._mcp import McpDirectory
from desktop_app.ui.dialogs import ProjectSettingsDialog, SettingsDialog
from desktop_app.ui.inbox import ApprovalInbox
from desktop_app.ui.timeline import TimelineModel, render_call_details
from tests.security.loop_lag import LagMeter
from tests.ui import conftest as ui_kit
from tests.ui.helpers import make_record

qloop, run = ui_kit.qloop, ui_kit.run  # the window tests' event loop

EVIL = "<b>x</b><img src='file:///etc/passwd'><a href='https://evil.example'>y</a>"
BIDI = "git\u202egnp.exe"


def _tab(qtbot, project: ProjectInfo | None = None):
    project = project or ProjectInfo("prj_1", "demo", "/tmp")
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    dlg = ProjectSettingsDialog(project, mcp_servers=None)
    qtbot.addWidget(dlg)
    dlg.tabs.setCurrentWidget(dlg.mcp)
    dlg.show()
    dlg.mcp.follow(bridge, project.id)
    return bus, bridge, dlg


def _report(bus: EventBus, *servers: McpServerInfo) -> None:
    bus.publish(McpServersChanged(project_id="prj_1", servers=[s.to_dict() for s in servers]))


def test_markup_in_a_servers_name_tools_version_and_stderr_is_text(qtbot, qloop):
    bus, bridge, dlg = _tab(qtbot)
    bad = McpServerInfo(EVIL, McpServerState.FAILED, McpWhere.HOST, "project", version=f"<h1>{EVIL}</h1>",
                        tools=(McpToolInfo(EVIL, f"<i>{EVIL}</i>", description=EVIL),),
                        error=f"<script>alert(1)</script>{EVIL}", stderr_tail=f"<h1>BIG</h1>\n{EVIL}\n")
    _report(bus, bad)
    mcp = dlg.mcp
    assert mcp.model.index(0, 0).data() == EVIL  # the cell's text is the name, character for character
    assert mcp.model.index(0, 0, mcp.model.index(0, 0)).data() == f"<i>{EVIL}</i>"
    assert mcp.title.textFormat() == Qt.TextFormat.PlainText and EVIL in mcp.title.text()
    assert mcp.grant_text.textFormat() == Qt.TextFormat.PlainText and EVIL in mcp.grant_text.text()
    log = mcp.log.toPlainText()
    assert "<h1>BIG</h1>" in log and "<script>alert(1)</script>" in log
    # bidi overrides are written as escapes wherever the name shows
    _report(bus, McpServerInfo(BIDI, McpServerState.READY, McpWhere.SANDBOX, "project"))
    assert mcp.model.index(0, 0).data() == "git\\u202egnp.exe" and "\\u202e" in mcp.title.text()

    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    directory = McpDirectory()
    directory.attach(bridge)
    inbox.attach(bridge, lambda sid: SessionInfo(sid, "prj_1", "s"))
    inbox.mcp_names = directory.call_name
    _report(bus, bad)
    desk = mcp_tool_name(EVIL, f"<i>{EVIL}</i>")
    bus.publish(PermissionRequired(session_id="ses_1", call_id="c1", name=desk, input={EVIL: EVIL}, risk="high"))
    text = inbox.card.toPlainText()
    # the tool's own name, whole, beside its label (made from the name, shown as text)
    assert f"MCP tool <i>{EVIL}</i> of server {EVIL}" in text and text.count(EVIL) >= 5
    assert "evil.example'>y</a>" in text  # not a link: its markup is there to read

    timeline = TimelineModel()
    rec = make_record(1, desk)
    rec.result = {"content": [], "details": {"mcp_server": EVIL, "mcp_server_version": EVIL, "mcp_where": EVIL}}
    timeline.add_records([rec])
    html = render_call_details(timeline.get("call_1"), rec=rec)
    assert "<img" not in html and "&lt;img" in html


def test_a_huge_stderr_tail_and_tool_list_do_not_hold_up_the_window(qtbot, run):
    bus, _bridge, dlg = _tab(qtbot)
    tools = tuple(McpToolInfo("big", f"tool_{i:05d}", description="d" * 200) for i in range(20_000))
    tail = "".join(f"line {i}: {'x' * 90}\n" for i in range(20_000)) + "THE CRASH\n"  # 2 MB
    servers = [McpServerInfo("big", McpServerState.READY, McpWhere.SANDBOX, "project", tools=tools),
               McpServerInfo("crash", McpServerState.FAILED, McpWhere.SANDBOX, "project", stderr_tail=tail)]
    event = McpServersChanged(project_id="prj_1", servers=[s.to_dict() for s in servers])
    # the collector as the app has it once started (runtime/_gc.py; put back after the test): a full pass then
    # walks what the window made, not the thousands of tests this process ran before
    settle_after_startup()

    async def report() -> LagMeter:
        async with LagMeter() as lag:
            bus.publish(event)
            dlg.mcp.tree.setCurrentIndex(dlg.mcp.model.index(1, 0))
            for _ in range(5):
                await asyncio.sleep(0.02)
        return lag

    lag = run(report())
    mcp = dlg.mcp
    assert mcp.model.rowCount(mcp.model.index(0, 0)) == 20_000
    assert not mcp.tree.isExpanded(mcp.model.index(0, 0))  # folded: no 20 000 rows laid out at once
    shown = mcp.log.toPlainText()
    assert shown.rstrip().endswith("THE CRASH") and len(shown) < 25_000 and "earlier characters not shown" in shown
    assert lag.worst < 1.0, lag  # gross: the list and the tail are bounded work, never a freeze


def test_a_users_host_server_is_marked_unsandboxed_and_needs_no_grant(qtbot, qloop):
    pasted = '{"mcpServers": {"notes": {"command": "notes-mcp", "run": "host"}}}'
    settings = SettingsDialog(Settings(path=None), key_source=None, keyring_ok=True)
    qtbot.addWidget(settings)
    settings.ask()
    settings.mcp_json.setPlainText(pasted)
    assert settings.preview_mcp() and settings.mcp_list.text() == "• notes — UNSANDBOXED (host)"
    settings._check()
    assert settings.value().mcp_servers == {"notes": {"command": "notes-mcp", "run": "host"}}
    # as the engine reports it: the user's own, on the host
    bus, _bridge, dlg = _tab(qtbot)
    _report(bus, McpServerInfo("notes", McpServerState.READY, McpWhere.HOST, "user"))
    m = dlg.mcp.model
    assert m.index(0, 0).data() == "notes  (yours)" and m.index(0, 2).data() == "UNSANDBOXED (host)"
    assert m.index(0, 2).data(Qt.ItemDataRole.FontRole).bold()
    assert m.index(0, 2).data(Qt.ItemDataRole.ForegroundRole).name() == "#d9363e"
    assert not dlg.mcp.grant.isVisible()


def test_a_project_server_asking_for_more_than_was_granted_is_not_granted(qtbot, run, tmp_path, desk_env):
    servers_file = tmp_path / ".agent-desk" / "mcp.json"
    servers_file.parent.mkdir()
    servers_file.write_text('{"mcpServers": {"notes": {"command": "notes-mcp", "run": "sandbox+network"}}}')
    project = ProjectInfo("prj_1", "demo", str(tmp_path))
    [consent] = consents(project, ConsentKind.MCP)
    approve(project, consent)
    servers_file.write_text('{"mcpServers": {"notes": {"command": "notes-mcp", "run": "host"}}}')  # asks more
    bus, _bridge, dlg = _tab(qtbot, project)
    fut = dlg.ask()
    _report(bus, McpServerInfo("notes", McpServerState.NEEDS_APPROVAL, McpWhere.HOST, "project",
                               relaxations=("host",), error='asks to run on the host: grant "host"'))
    mcp = dlg.mcp
    assert mcp.grant.isVisible() and not mcp.grant.isChecked()
    assert mcp.model.index(0, 1).data() == "needs your grant"
    text = mcp.grant_text.text()
    assert "UNSANDBOXED" in text and "every file" in text and "changed since you granted it (where it runs" in text
    dlg.folder.setText(str(tmp_path))
    dlg._check()
    run(fut)
    [after] = consents(project, ConsentKind.MCP)
    assert after.status is ConsentStatus.CHANGED and after.approved_digest == consent.digest  # nothing more


def test_a_malformed_report_or_paste_is_refused_and_the_view_keeps_what_it_had(qtbot, qloop):
    bus, _bridge, dlg = _tab(qtbot)
    _report(bus, McpServerInfo("git", McpServerState.READY))
    bus.publish(McpServersChanged(project_id="prj_1", servers=[{"name": "x", "where": "<b>anywhere</b>"}]))
    assert dlg.mcp.model.rowCount() == 1 and "could not be read" in dlg.mcp.empty.text()
    settings = SettingsDialog(Settings(path=None), key_source=None, keyring_ok=True)
    qtbot.addWidget(settings)
    settings.ask()
    for text, said in (("[" * 200_000, "nested too deeply"), ('{"": {"command": "x"}}', "an empty name"),
                       ('{"a.b": {"command": "x"}, "a_b": {"command": "y"}}', "the same names")):
        settings.mcp_json.setPlainText(text)
        settings._check()
        assert settings.isVisible() and said in settings.mcp_error.text(), settings.mcp_error.text()


def test_a_grant_is_bound_to_the_entry_the_person_read(qtbot, run, tmp_path, desk_env):
    # the repository changed a granted server's command since: the engine asks again, and so does the tab
    servers_file = tmp_path / ".agent-desk" / "mcp.json"
    servers_file.parent.mkdir()
    servers_file.write_text('{"mcpServers": {"web": {"command": "curl-mcp", "run": "sandbox+network"}}}')
    project = ProjectInfo("prj_1", "demo", str(tmp_path), settings={"mcp_grants": {"web": "sandbox+network"},
                                                                    "mcp_grant_digests": {"web": "0" * 64}})
    bus, _bridge, dlg = _tab(qtbot, project)
    fut = dlg.ask()
    _report(bus, McpServerInfo("web", McpServerState.NEEDS_APPROVAL, McpWhere.SANDBOX_NETWORK, "project"))
    mcp = dlg.mcp
    assert not mcp.grant.isChecked() and "changed since you granted it" in mcp.grant_text.text()
    assert mcp.model.index(0, 1).data() == "needs your grant"
    # ticking binds to the entry as the tab read it; a server the file no longer has is not granted
    servers_file.unlink()
    mcp.model.consents.clear()
    mcp.grant.setChecked(True)
    assert not mcp.grant.isChecked() and "Not granted" in mcp.grant_text.text()
    servers_file.write_text('{"mcpServers": {"web": {"command": "curl-mcp", "run": "sandbox+network"}}}')
    mcp.grant.setChecked(True)  # read again on the tick: there it is
    assert mcp.grant.isChecked() and mcp.model.index(0, 1).data() == "granted: starts when you Save"
    dlg.folder.setText(str(tmp_path))
    dlg._check()
    saved = run(fut)
    from desktop_app.mcp_client import read_project_servers

    assert mcp_consented(saved)(read_project_servers(tmp_path)[0])
    assert not any(k.startswith("mcp_grant") for k in saved.settings)  # the old grant keys moved out
