"""The project settings' MCP tab: servers and tools as a person sees them, live from McpServersChanged on the
real bus and bridge, the switches and grants saved into the project's settings."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from desktop_app.core import (
    EventBus,
    McpServerInfo,
    McpServersChanged,
    McpServerState,
    McpToolInfo,
    McpWhere,
    MemoryStore,
    ProjectInfo,
)
from desktop_app.mcp_client import read_project_servers
from desktop_app.runtime._consent import mcp_consented
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui.dialogs import ProjectSettingsDialog
from desktop_app.ui.dialogs._mcp_section import NOT_STARTED
from tests.ui.fake_desk import FakeDesk


def servers() -> list[McpServerInfo]:
    git = (McpToolInfo("git", "git_status", read_only=True), McpToolInfo("git", "git_commit"),
           McpToolInfo("git", "git_reset", destructive=True))
    return [
        McpServerInfo("git", McpServerState.READY, McpWhere.SANDBOX, "project", "mcp-server-git 1.26.0", git),
        McpServerInfo("fetch", McpServerState.NEEDS_APPROVAL, McpWhere.SANDBOX_NETWORK, "project",
                      relaxations=("network",), error="asks for the network"),
        McpServerInfo("notes", McpServerState.READY, McpWhere.HOST, "user", "notes 0.3",
                      (McpToolInfo("notes", "search", read_only=True),)),
        McpServerInfo("memory", McpServerState.FAILED, McpWhere.SANDBOX, "project",
                      error="exited with code 1", stderr_tail="npm ERR! 404 Not Found\n"),
    ]


def cells(model, row: int, parent=None) -> list[str]:
    from PySide6.QtCore import QModelIndex

    p = parent or QModelIndex()
    return [model.index(row, c, p).data() for c in range(model.columnCount())]


def select(section, name: str) -> None:
    section.tree.setCurrentIndex(section.model.index(section.model.server_row(name), 0))


def test_the_tab_follows_the_bus_and_shows_status_where_and_tools(qtbot, qloop, tmp_path):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    project = ProjectInfo("prj_1", "demo", str(tmp_path))
    dlg = ProjectSettingsDialog(project, mcp_servers=None)
    qtbot.addWidget(dlg)
    mcp = dlg.mcp
    mcp.follow(bridge, project.id)
    assert mcp.empty.text() == NOT_STARTED and not mcp.empty.isHidden()
    bus.publish(McpServersChanged(project_id="prj_other", servers=[s.to_dict() for s in servers()]))
    assert mcp.model.rowCount() == 0  # another project's servers are not these
    bus.publish(McpServersChanged(project_id=project.id, servers=[s.to_dict() for s in servers()]))
    m = mcp.model
    assert [cells(m, r)[:3] for r in range(m.rowCount())] == [
        ["git", "ready", "sandbox"], ["fetch", "needs your grant", "sandbox + network"],
        ["notes  (yours)", "ready", "UNSANDBOXED (host)"], ["memory", "failed", "sandbox"]]
    assert m.index(2, 2).data(Qt.ItemDataRole.FontRole).bold()  # as loud as the local sandbox's mark
    git = m.index(0, 0)
    assert [cells(m, r, git)[0] for r in range(m.rowCount(git))] == ["git_status", "git_commit", "git_reset"]
    assert [cells(m, r, git)[3] for r in range(3)] == ["read-only", "may write (no hints)", "destructive (high risk)"]
    assert "mcp-server-git 1.26.0" in cells(m, 0)[3]
    select(mcp, "memory")
    assert "exited with code 1" in mcp.log.toPlainText() and "npm ERR! 404 Not Found" in mcp.log.toPlainText()
    # a restart: the selected server stays selected, its status follows
    after = servers()
    after[3].state, after[3].error, after[3].stderr_tail = McpServerState.RESTARTING, "", ""
    bus.publish(McpServersChanged(project_id=project.id, servers=[s.to_dict() for s in after]))
    assert mcp.selected_server().name == "memory" and cells(m, 3)[1] == "restarting…"
    mcp.stop_following()
    bus.publish(McpServersChanged(project_id=project.id, servers=[]))
    assert m.rowCount() == 4


def test_switches_and_a_grant_are_saved_into_the_project(qtbot, run, tmp_path, desk_env):
    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / ".agent-desk" / "mcp.json").write_text(
        '{"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"], "run": "sandbox+network"}}}')
    project = ProjectInfo("prj_1", "demo", str(tmp_path), settings={"mcp_disabled_tools": ["mcp__git__git_reset"]})
    dlg = ProjectSettingsDialog(project, mcp_servers=servers())
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.tabs.setCurrentWidget(dlg.mcp)
    m = dlg.mcp.model
    git = m.index(0, 0)
    assert m.index(2, 0, git).data(Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked  # saved before
    assert m.index(1, 0, git).data(Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert m.setData(m.index(1, 0, git), Qt.CheckState.Unchecked.value, Qt.ItemDataRole.CheckStateRole)
    assert cells(m, 1, git)[1] == "off"
    m.setData(m.index(3, 0), Qt.CheckState.Unchecked.value, Qt.ItemDataRole.CheckStateRole)  # memory off
    assert cells(m, 3)[1].startswith("switched off")
    select(dlg.mcp, "fetch")
    assert dlg.mcp.grant.isVisibleTo(dlg) and not dlg.mcp.grant.isChecked()
    assert "reach the network" in dlg.mcp.grant_text.text() and "fetch" in dlg.mcp.grant_text.text()
    dlg.mcp.grant.setChecked(True)
    assert cells(m, 1)[1] == "granted: starts when you Save"
    select(dlg.mcp, "notes")  # the user's own host server: no grant asked
    assert not dlg.mcp.grant.isVisibleTo(dlg)
    dlg.folder.setText(str(tmp_path))
    dlg._check()
    saved: ProjectInfo = run(fut)
    assert saved.settings["mcp_disabled_tools"] == ["mcp__git__git_commit", "mcp__git__git_reset"]
    assert saved.settings["mcp_disabled_servers"] == ["memory"]
    assert not any(k.startswith("mcp_grant") for k in saved.settings)  # a grant is a consent record, not a setting
    # bound to the entry as it is, as `agent-desk mcp grant` binds it: the engine starts it
    entry = read_project_servers(tmp_path)[0]
    assert mcp_consented(saved)(entry)
    assert json.loads((desk_env / "cfg" / "consent.json").read_text())["mcp"][str(tmp_path.resolve())]["fetch"][
        "sha256"] == entry.digest()


def test_an_untouched_project_keeps_its_settings_equal(qtbot, run, tmp_path):
    # equal settings keep the project's runtime (and its container); no empty MCP keys are added
    project = ProjectInfo("prj_1", "demo", str(tmp_path), settings={"network": False, "memory": "2g", "cpus": 2.0,
                                                                    "workspace_ro": False, "sandbox": "docker"})
    dlg = ProjectSettingsDialog(project, mcp_servers=servers())
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg._check()
    assert run(fut).settings == project.settings


def test_the_controller_opens_the_tab_with_the_runtime_list_or_the_last_report(qtbot, run, store, tmp_path):
    from desktop_app.ui import AppController, MainWindow

    class Runtime:  # an open runtime's list: ProjectRuntime.mcp_servers()
        def mcp_servers(self) -> list[McpServerInfo]:
            return servers()[:1]

    runtimes_open: dict = {}

    class Desk(FakeDesk):  # the agreed seam: Desk.runtime(project id)
        def runtime(self, project_id):
            return runtimes_open.get(project_id)

    bus = EventBus(MemoryStore())
    window = MainWindow()
    qtbot.addWidget(window)
    desk = Desk(store=store, bus=bus)
    controller = AppController(window, desk)
    assert run(controller.mcp_servers("prj_1")) is None  # nothing known yet: not started
    bus.publish(McpServersChanged(project_id="prj_1", servers=[s.to_dict() for s in servers()]))
    assert [s.name for s in run(controller.mcp_servers("prj_1"))] == ["git", "fetch", "notes", "memory"]
    runtimes_open["prj_1"] = Runtime()
    assert [s.name for s in run(controller.mcp_servers("prj_1"))] == ["git"]
    assert controller.mcp.call_name("mcp__git__git_status", "prj_1").where == "sandbox"
