"""The settings dialog, opened with open() and awaited: the keyring warning and the values it returns."""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import QLabel

from desktop_app.config import Settings
from desktop_app.ui.dialogs import SettingsDialog


def test_settings_dialog_warns_without_keyring_and_returns_values(qtbot, run):
    settings = Settings(path=None, model="claude-sonnet-4-6", permission_mode="ask")
    dlg = SettingsDialog(settings, key_source=None, keyring_ok=False)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    assert dlg.isVisible() and not dlg.keyring_warning.isHidden()
    assert "No keyring backend" in dlg.keyring_warning.text()
    dlg.key.setText("sk-ant-test-123")
    dlg.mode.setCurrentIndex(dlg.mode.findData("accept-edits"))
    dlg.theme.setCurrentIndex(dlg.theme.findData("dark"))
    dlg.accept()
    result = run(fut)
    assert (result.api_key, result.permission_mode, result.theme) == ("sk-ant-test-123", "accept-edits", "dark")
    dlg2 = SettingsDialog(settings, key_source="keyring", keyring_ok=True)
    qtbot.addWidget(dlg2)
    fut2 = dlg2.ask()
    assert dlg2.keyring_warning.isHidden() and "keyring" in dlg2.key_state.text()
    dlg2.reject()
    assert run(fut2) is None


CLAUDE_DESKTOP = """{
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "."]},
    "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${keyring:docs}"}},
    "notes": {"command": "notes-mcp", "run": "host", "autoApprove": []}
  },
  "globalShortcut": "Ctrl+Space"
}"""


def test_pasted_mcp_servers_are_checked_listed_and_returned(qtbot, run):
    settings = Settings(path=None)
    dlg = SettingsDialog(settings, key_source=None, keyring_ok=True)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.tabs.setCurrentIndex(1)
    assert dlg.mcp_json.toPlainText() == "" and dlg.mcp_list.text() == "No servers of your own."
    dlg.mcp_json.setPlainText(CLAUDE_DESKTOP)
    qtbot.waitUntil(lambda: "git" in dlg.mcp_list.text())  # checked when typing pauses
    assert dlg.mcp_list.text().splitlines() == ["• git — sandbox", "• docs — network (HTTP)",
                                                "• notes — UNSANDBOXED (host)"]
    warnings = dlg.mcp_error.text()
    assert "'globalShortcut'" in warnings and '"notes": ignored the unknown key \'autoApprove\'' in warnings
    dlg._check()
    result = run(fut)
    assert list(result.mcp_servers) == ["git", "docs", "notes"]
    assert result.mcp_servers["git"]["args"] == ["mcp-server-git", "--repository", "."]


def test_a_bad_server_is_refused_with_its_name_and_field_and_nothing_is_saved(qtbot, qloop):
    dlg = SettingsDialog(Settings(path=None), key_source=None, keyring_ok=True)
    qtbot.addWidget(dlg)
    dlg.ask()
    cases = {
        '{"git": {"args": ["x"]}}': '"git": needs either "command"',
        '{"git": {"command": "uvx", "args": "mcp-server-git"}}': '"git".args: must be a list of strings',
        '{"web": {"url": "ftp://x"}}': '"web".url: must start with https://',
        '{"web": {"url": "https://x", "headers": {"A": 1}}}': '"web".headers.A: must be a string',
        '{"web": {"url": "https://x", "type": "sse"}}': '"web".type: "sse" servers are not supported',
        '{"git": {"command": "uvx", "run": "root"}}': '"git".run: must be one of sandbox, sandbox+network, host',
        '{"mcpServers": []}': '"mcpServers" must be an object',
        '{"git": {"command": "a"}, "git": {"command": "b"}}': '"git" is given twice',
        '{"git": {"command": "uvx",}}': "not valid JSON at line 1, column 27",
        '{"my git": {"command": "uvx"}}': "server 'my git': the name must be letters",  # the engine's own rule
    }
    for text, expected in cases.items():
        dlg.mcp_json.setPlainText(text)
        dlg.tabs.setCurrentIndex(0)
        dlg._check()
        assert dlg.isVisible(), text  # not saved
        assert dlg.tabs.currentIndex() == 1 and expected in dlg.mcp_error.text(), (text, dlg.mcp_error.text())
        assert "hint:" in dlg.mcp_error.text()


def test_edit_settings_saves_the_users_servers_in_the_settings_file(qtbot, run, tmp_path):
    from PySide6.QtWidgets import QApplication

    from desktop_app.ui.dialogs import edit_settings

    settings = Settings(path=tmp_path / "settings.json")
    task = asyncio.ensure_future(edit_settings(settings, None))
    qtbot.waitUntil(lambda: any(isinstance(w, SettingsDialog) and w.isVisible()
                                for w in QApplication.topLevelWidgets()))
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, SettingsDialog) and w.isVisible())
    dlg.mcp_json.setPlainText('{"time": {"command": "uvx", "args": ["mcp-server-time"]}}')
    dlg._check()
    run(task)
    assert settings.mcp_servers == {"time": {"command": "uvx", "args": ["mcp-server-time"]}}
    assert Settings.load(settings.path).mcp_servers == settings.mcp_servers


def test_the_plugins_tab_lists_each_plugin_and_switches_one_off(qtbot, run, tmp_path, monkeypatch):
    from desktop_app.runtime import tools_with_plugins
    from tests.plugins.test_plugin_tools import PLUGIN, install

    install(tmp_path, "desk-lines", "1.2.0", {"lines": "desk_lines:tools"}, PLUGIN)
    install(tmp_path, "desk-broken", "0.1", {"broken": "desk_broken:tools"}, "raise ImportError('no numpy')")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = Settings(path=None, plugins_disabled=["gone-package"])
    found = tools_with_plugins(settings)[1].found
    dlg = SettingsDialog(settings, key_source=None, keyring_ok=True, plugins=found)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.tabs.setCurrentWidget(dlg.plugins)
    lines, broken = dlg.plugins.boxes["lines"], dlg.plugins.boxes["broken"]
    assert lines.text() == "count_lines — desk-lines 1.2.0" and lines.isChecked() and lines.isEnabled()
    assert not broken.isEnabled() and not broken.isChecked()
    said = [w.text() for w in dlg.plugins.findChildren(QLabel)]
    assert "Not loaded: loading it raised ImportError: no numpy" in said
    lines.setChecked(False)
    dlg.accept()
    assert run(fut).plugins_disabled == ["gone-package", "lines"]
