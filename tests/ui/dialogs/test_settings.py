"""The settings dialog, opened with open() and awaited: the keyring warning and the values it returns."""

from __future__ import annotations

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
