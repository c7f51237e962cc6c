"""The project settings' Network tab: the mode, the presets and the person's list (add, remove, a malformed
pattern refused with the reason naming the setting), saved with the project; the repository's list shown with
its consent, never taken into the person's list."""

from __future__ import annotations

from pathlib import Path

from desktop_app.core import ConsentKind, ProjectInfo
from desktop_app.runtime import approve, consents
from desktop_app.ui.dialogs import ProjectSettingsDialog


def test_the_network_tab_edits_the_list_and_shows_the_repositorys(qtbot, run, desk_env: Path, tmp_path: Path):
    folder = tmp_path / "p"
    (folder / ".agent-desk").mkdir(parents=True)
    (folder / ".agent-desk/network.toml").write_text('allow = ["docs.example.org"]\n')
    project = ProjectInfo(id="prj_n", name="p", path=str(folder),
                          settings={"network": "allowlist", "network_allow": ["@python", "pypi.example.org"]})
    dlg = ProjectSettingsDialog(project)
    qtbot.addWidget(dlg)
    net = dlg.net
    assert net.mode.currentData() == "allowlist" and net.allow_box.isEnabled()
    assert net.presets["python"].isChecked() and not net.presets["node"].isChecked()
    assert "pypi.org" in net.presets["python"].toolTip()
    assert "docs.example.org" in net.repository.text() and "waiting for your approval" in net.repository.text()
    for bad in ("*", "*.com", "bad name.org", "@nothing", "10.0.0.0/33"):
        net.pattern.setText(bad)
        assert not net.add_pattern()
        assert "network_allow" in net.error.text() and net.pattern.text() == bad
    net.pattern.setText("registry.npmjs.org:443")
    assert net.add_pattern() and net.error.text() == "" and net.pattern.text() == ""
    net.pattern.setText("@github")
    assert net.add_pattern() and net.presets["github"].isChecked()
    net.list.item(0).setSelected(True)
    net.remove_selected()
    net.pattern.setText("half typed.org")
    fut = dlg.ask()
    dlg._check()
    assert "not added yet" in dlg.error.text()
    net.pattern.clear()
    dlg._check()
    saved: ProjectInfo = run(fut)
    assert saved.settings["network"] == "allowlist"
    assert saved.settings["network_allow"] == ["@python", "@github", "registry.npmjs.org:443"]

    [consent] = consents(project, ConsentKind.NETWORK)
    approve(project, consent)
    again = ProjectSettingsDialog(saved)
    qtbot.addWidget(again)
    assert "approved by you" in again.net.repository.text()
    again.net.mode.setCurrentIndex(again.net.mode.findData(False))
    assert not again.net.allow_box.isEnabled() and again.net.values()["network"] is False
    assert "docs.example.org" not in again.net.patterns()

    stored = ProjectInfo(id="prj_m", name="m", path=str(folder), settings={"network": "allowlist",
                                                                          "network_allow": ["@pyton", "ok.example"]})
    third = ProjectSettingsDialog(stored)
    qtbot.addWidget(third)
    assert third.net.patterns() == ["@pyton", "ok.example"]  # an unknown preset stays shown, and is refused
    third._check()
    assert "network_allow" in third.error.text() and "@pyton" in third.error.text()
