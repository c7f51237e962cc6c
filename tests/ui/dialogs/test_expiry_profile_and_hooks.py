"""The engine within reach of the dialogs: the approval expiry set in Settings reaching a real executor (a call
waits, expires, is denied and recorded), a project's profile, tool switches and expiry, its hooks file and the
grant, and the user's hooks checked before they are saved."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop_app.config import Settings
from desktop_app.core import ConsentStatus, EventBus, Outcome, ProjectInfo, ToolCallState, hooks_digest
from desktop_app.runtime import ProjectRuntimes, approval_expiry, project_hooks_trust
from desktop_app.sandbox import LocalSandbox
from desktop_app.ui.dialogs import ProjectSettingsDialog, SettingsDialog
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use

# Every test here runs with its own isolated desk (tests/kit).
pytestmark = pytest.mark.usefixtures("desk_env")


def _shown(kind: type):
    return next((w for w in QApplication.topLevelWidgets() if isinstance(w, kind) and w.isVisible()), None)


def test_expiry_set_in_the_settings_dialog_reaches_the_engine(qtbot, run, store, tmp_path: Path) -> None:
    from desktop_app.ui.dialogs import edit_settings

    folder = tmp_path / "project"
    folder.mkdir()
    with AnthropicServer([reply(tool_use("bash_run", {"command": "touch ran"})), reply(text("ok"))]) as server:
        settings = Settings(path=tmp_path / "settings.json", base_url=server.url, api_key=server.api_key)
        task = asyncio.ensure_future(edit_settings(settings, None))
        qtbot.waitUntil(lambda: _shown(SettingsDialog) is not None)
        dlg = _shown(SettingsDialog)
        dlg.tabs.setCurrentIndex(2)
        dlg.expiry.setValue(1)
        dlg._check()
        run(task)
        assert settings.approval_expiry_s == 1 and Settings.load(settings.path).approval_expiry_s == 1
        project = ProjectInfo(id="prj_x", name="x", path=str(folder), permission_mode="ask")
        run(store.save_project(project))
        bus = run(EventBus.open(store))
        runtimes = ProjectRuntimes(settings=settings, store=store, bus=bus,
                                   sandbox_factory=lambda p: LocalSandbox(p.path))
        try:
            session = run(runtimes(project, None))
            result = run(session.send("go"), timeout=30_000)  # the approval waits a second, then expires
            [rec] = run(store.session_records(session.session.id))
        finally:
            run(runtimes.close())
            bus.close()
    assert result.reason == "end_turn"
    assert rec.state is ToolCallState.DENIED and rec.outcome is Outcome.EXPIRED and not (folder / "ran").exists()
    assert rec.approval.expires_at is not None
    assert [e.state for e in rec.trail][-2:] == [ToolCallState.APPROVAL_REQUIRED, ToolCallState.DENIED]
    assert "expired" in rec.trail[-1].note


def test_the_project_dialog_sets_the_profile_the_switches_and_the_expiry(qtbot, run, tmp_path: Path) -> None:
    project = ProjectInfo(id="p", name="p", path=str(tmp_path), settings={"disabled_tools": ["fs_write", "mcp__x__y"]})
    dlg = ProjectSettingsDialog(project, default_expiry=300)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    reach = dlg.reach
    assert "5 min" in reach.expiry.specialValueText() and reach.expiry.value() == reach.expiry.minimum()
    items = {reach.tool_list.item(i).data(Qt.ItemDataRole.UserRole): reach.tool_list.item(i)
             for i in range(reach.tool_list.count())}
    assert items["fs_write"].checkState() == Qt.CheckState.Unchecked
    assert items["bash_run"].checkState() == Qt.CheckState.Checked
    items["bash_run"].setCheckState(Qt.CheckState.Unchecked)
    reach.profile.setCurrentText("minimal")
    reach.expiry.setValue(45)
    dlg._check()
    saved = run(fut)
    st = saved.settings
    assert st["tool_profile"] == "minimal" and st["approval_expiry_s"] == 45
    assert st["disabled_tools"] == ["bash_run", "fs_write", "mcp__x__y"]  # an MCP tool's switch is kept
    assert "hooks_grant_digest" not in st
    assert approval_expiry(Settings(approval_expiry_s=300), saved) == 45


def test_an_inherited_expiry_leaves_the_key_out(qtbot, run, tmp_path: Path) -> None:
    project = ProjectInfo(id="p", name="p", path=str(tmp_path), settings={"approval_expiry_s": 10})
    dlg = ProjectSettingsDialog(project)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    assert dlg.reach.expiry.value() == 10
    dlg.reach.expiry.setValue(dlg.reach.expiry.minimum())  # "the default from Settings"
    dlg._check()
    assert "approval_expiry_s" not in run(fut).settings


HOOKS = '[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "./guard.sh"\n'


def test_the_hooks_file_is_shown_and_granted_by_the_text_shown(qtbot, run, tmp_path: Path) -> None:
    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / ".agent-desk/hooks.toml").write_text(HOOKS)
    project = ProjectInfo(id="p", name="p", path=str(tmp_path))
    dlg = ProjectSettingsDialog(project)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    reach = dlg.reach
    assert reach.hooks_view.toPlainText() == HOOKS and "Never granted" in reach.hooks_state.text()
    assert not reach.hooks_grant.isChecked()
    (tmp_path / ".agent-desk/hooks.toml").write_text(HOOKS + '[[PostToolUse]]\ncommand = "curl evil"\n')
    reach.hooks_grant.setChecked(True)  # the person granted what they saw, not what is on disk now
    dlg._check()
    saved = run(fut)
    assert "hooks_grant_digest" not in saved.settings  # a grant is a consent record, out of the settings
    assert project_hooks_trust(saved).approved_digest == hooks_digest(HOOKS)
    assert project_hooks_trust(saved).status == "changed"
    (tmp_path / ".agent-desk/hooks.toml").write_text(HOOKS)
    assert project_hooks_trust(saved).status is ConsentStatus.APPROVED
    again = ProjectSettingsDialog(saved)
    qtbot.addWidget(again)
    fut2 = again.ask()
    assert again.reach.hooks_grant.isChecked() and "Granted" in again.reach.hooks_state.text()
    again.reach.hooks_grant.setChecked(False)
    again._check()
    run(fut2)
    assert project_hooks_trust(saved).approved_digest is None


def test_a_project_without_a_hooks_file_cannot_grant_one(qtbot, tmp_path: Path) -> None:
    dlg = ProjectSettingsDialog(ProjectInfo(id="p", name="p", path=str(tmp_path)))
    qtbot.addWidget(dlg)
    assert not dlg.reach.hooks_grant.isEnabled() and "No hooks file" in dlg.reach.hooks_state.text()
    assert "hooks_grant_digest" not in dlg.reach.values() and dlg.reach.decisions() == []


def test_the_users_hooks_are_checked_before_they_are_saved(qtbot, run) -> None:
    settings = Settings(path=None, hooks={"PostToolUse": [{"matcher": "fs_*", "command": "echo ok"}]})
    dlg = SettingsDialog(settings, key_source=None, keyring_ok=True)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    assert "[[PostToolUse]]" in dlg.hooks_toml.toPlainText()
    dlg.hooks_toml.setPlainText('[[PreToolUse]]\nmatcher = "fs_(write"\ncommand = "x"\n')
    dlg._check()
    assert dlg.isVisible() and dlg.tabs.currentIndex() == 2 and "not a valid regex" in dlg.hooks_error.text()
    dlg.hooks_toml.setPlainText('[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "./guard.sh"\ntimeout = 5\n')
    dlg._check()
    result = run(fut)
    assert result.hooks == {"PreToolUse": [{"matcher": "bash_run", "command": "./guard.sh", "timeout": 5}]}
    assert result.approval_expiry_s is None


def test_a_hooks_file_that_cannot_be_read_is_not_granted(qtbot, run, tmp_path: Path) -> None:
    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / ".agent-desk/hooks.toml").write_text('[[PreToolUse]]\nmatcher = "x"\n')
    dlg = ProjectSettingsDialog(ProjectInfo(id="p", name="p", path=str(tmp_path)))
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.reach.hooks_grant.setChecked(True)
    dlg._check()
    assert dlg.isVisible() and "'command' must be" in dlg.error.text() and dlg.value() is None
    dlg.reach.hooks_grant.setChecked(False)  # saved without the grant: the hooks stay off
    dlg._check()
    assert project_hooks_trust(run(fut)).approved_digest is None


def test_saving_a_grant_never_blocks_the_window(qtbot, run, tmp_path: Path, desk_env: Path) -> None:
    """A CLI run holds the consent file's lock while the person clicks Save: the grant waits on a worker
    thread, the window keeps answering (a timer fires, the dialog says it is saving), and the save completes
    once the lock is let go."""
    import fcntl
    import os

    from PySide6.QtCore import QTimer

    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / ".agent-desk/hooks.toml").write_text(HOOKS)
    project = ProjectInfo(id="p", name="p", path=str(tmp_path))
    dlg = ProjectSettingsDialog(project)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.reach.hooks_grant.setChecked(True)
    (desk_env / "cfg").mkdir(exist_ok=True)
    fd = os.open(desk_env / "cfg" / ".consent.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is approving something
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    try:
        dlg.save_btn.click()
        qtbot.waitUntil(lambda: len(ticks) >= 5)  # the loop runs while the grant waits for the lock
        assert not fut.done() and "Saving" in dlg.error.text() and not dlg.save_btn.isEnabled()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        timer.stop()
    saved = run(fut)
    assert saved is not None and project_hooks_trust(saved).approved_digest == hooks_digest(HOOKS)
