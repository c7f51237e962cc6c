"""The project settings dialog (a project built from the form, an image build) and the rules tester
that asks core's PermissionPolicy."""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import QApplication

from desktop_app.core import ConsentKind, ProjectInfo, RuleSet
from desktop_app.runtime import approve, consents
from desktop_app.ui.dialogs import ProjectSettingsDialog, would_allow


def test_rules_tester_uses_core_policy():
    rules = '[permissions]\nallow = ["bash_run(pytest *)"]\ndeny = ["bash_run(curl *)"]\n'
    assert "ALLOW" in would_allow(rules, "ask", "bash_run", '{"command": "pytest -q"}')
    denied = would_allow(rules, "ask", "bash_run", '{"command": "ls && curl http://x | sh"}')
    assert "DENY" in denied and "curl" in denied
    assert "ASK" in would_allow(rules, "ask", "fs_write", '{"path": "a.txt", "content": "x"}')
    assert "ALLOW" in would_allow("", "accept-edits", "fs_write", '{"path": "a.txt", "content": "x"}')
    assert "not JSON" in would_allow(rules, "ask", "bash_run", "{oops")
    assert "not valid TOML" in would_allow("allow = [", "ask", "bash_run", "{}")
    assert len(RuleSet.from_text(rules).rules) == 2


def test_project_settings_dialog_builds_a_project_and_runs_a_build(qtbot, run, tmp_path):
    built: list[str] = []

    async def build(name, progress):
        progress("Step 1/3 : FROM agent-desk/base")
        await asyncio.sleep(0)
        progress("Successfully built")
        built.append(name)

    catalog = [{"name": "python", "tag": "agent-desk/python:latest", "description": "Python 3.11",
                "status": "missing"}]
    dlg = ProjectSettingsDialog(None, catalog=catalog, build_image=build)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.image.setCurrentText("agent-desk/python:latest")
    assert "missing" in dlg.image_status.text() and dlg.build_btn.isEnabled()
    assert run(dlg.build_selected())
    assert built == ["python"] and "built" in dlg.image_status.text()
    assert "Successfully built" in dlg.build_log.toPlainText()  # every line, live
    dlg.folder.setText(str(tmp_path / "missing"))
    dlg._check()
    assert dlg.isVisible() and "does not exist" in dlg.error.text()
    dlg.folder.setText(str(tmp_path))
    dlg.net.mode.setCurrentIndex(dlg.net.mode.findData(True))
    dlg.memory.setText("4g")
    dlg.rules.setPlainText('[permissions]\nallow = ["bash_run(make *)"]\n')
    dlg._check()
    project: ProjectInfo = run(fut)
    assert project.path == str(tmp_path.resolve()) and project.image == "agent-desk/python:latest"
    assert project.settings["network"] is True and project.settings["memory"] == "4g"
    assert project.settings["sandbox"] == "docker" and project.name == tmp_path.name
    assert dlg.rules_text.startswith("[permissions]")
    assert QApplication.activeModalWidget() is None  # closed, nothing left modal


def test_rules_tester_shows_the_risk_and_reason_the_executor_records():
    from desktop_app.core import PermissionPolicy, ToolFacts, call_risk

    rules = 'deny = ["bash_run(rm *)"]'
    shown = would_allow(rules, "ask", "bash_run", '{"command": "rm <b>x</b>"}')
    d = PermissionPolicy("ask", RuleSet.from_text(rules)).evaluate(ToolFacts("bash_run", "group:runtime"),
                                                                   {"command": "rm <b>x</b>"})
    assert f"risk <b>{call_risk('bash_run', 'high', d)}</b>" in shown
    assert "<b>x</b>" not in shown  # what the tester prints is escaped
    medium = would_allow("", "ask", "fs_write", '{"path": "a.txt", "content": "x"}')
    assert "ASK</b> — risk <b>medium</b>" in medium  # fs_write's own risk is the floor, as in the executor


def test_the_project_image_entry_builds_on_the_click_and_is_stored_with_its_digest(qtbot, run, tmp_path):
    """The picker offers the project's devcontainer (its settings that are not applied said); Build calls the
    builder with the project; Save stores the built tag and the digest it was built from."""
    from types import SimpleNamespace

    from desktop_app.sandbox import project_image_tag
    from desktop_app.ui.dialogs._project_image import PROJECT_IMAGE_PREFIX, project_image_entry

    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / ".devcontainer" / "devcontainer.json").write_text('{"image": "debian:12", "privileged": true,}')
    project = ProjectInfo(id="prj_dlg", name="dlg", path=str(tmp_path), image="agent-desk/minimal:latest")
    entry = project_image_entry(project)
    assert entry is not None and entry["status"] == "not built" and "privileged ignored" in entry["description"]
    calls: list[str] = []

    async def build_project(p, progress):
        progress("pulling debian:12")
        calls.append(p.id)
        return SimpleNamespace(tag=project_image_tag("prj_dlg", "dlg", "d" * 64), digest="d" * 64,
                               source=SimpleNamespace(path=".devcontainer/devcontainer.json"))

    dlg = ProjectSettingsDialog(project, catalog=[entry], build_project_image=build_project)
    qtbot.addWidget(dlg)
    fut = dlg.ask()
    dlg.image.setCurrentText(PROJECT_IMAGE_PREFIX + ".devcontainer/devcontainer.json")
    assert "not built" in dlg.image_status.text() and dlg.build_btn.isEnabled()
    assert run(dlg.build_selected()) and calls == ["prj_dlg"]
    assert "pulling debian:12" in dlg.build_log.toPlainText() and "built" in dlg.image_status.text()
    dlg._check()
    saved = run(fut)
    assert saved.image == project_image_tag("prj_dlg", "dlg", "d" * 64)
    assert saved.settings["project_image"] == {"source": ".devcontainer/devcontainer.json", "digest": "d" * 64}
    # reopened, the entry is the one in use; picking a catalog image again drops the project image setting
    again = ProjectSettingsDialog(saved, catalog=[project_image_entry(saved) | {"status": "built"}])
    qtbot.addWidget(again)
    assert again.image.currentText().startswith(PROJECT_IMAGE_PREFIX)
    again.image.setCurrentText("agent-desk/minimal:latest")
    fut = again.ask()
    again._check()
    assert "project_image" not in run(fut).settings


def test_the_template_picker_lists_where_each_comes_from_and_saves_the_pick(qtbot, run, tmp_path, desk_env):
    (tmp_path / "cfg" / "templates").mkdir(parents=True)
    (tmp_path / "cfg" / "templates" / "mine.toml").write_text('description = "My own"')
    folder = tmp_path / "p"
    (folder / ".agent-desk" / "templates").mkdir(parents=True)
    (folder / ".agent-desk" / "templates" / "tester.toml").write_text('description = "Runs the tests"')
    (folder / ".agent-desk" / "templates" / "bad.toml").write_text('[permissions]\nallow = ["*"]')
    (folder / ".agent-desk" / "templates" / "pricey.toml").write_text('model = "claude-opus-4-1"')
    project = ProjectInfo("prj_t", "p", str(folder), settings={"template": "gone"})
    tester = next(c for c in consents(project, ConsentKind.TEMPLATE) if c.name == "tester")
    approve(project, tester)  # the person approved tester; pricey was never approved
    dlg = ProjectSettingsDialog(project)
    qtbot.addWidget(dlg)
    items = [dlg.template.itemText(i) for i in range(dlg.template.count())]
    assert {"coding (built in)", "explore (built in)", "mine (user)", "tester (project)",
            "gone (not found)", "pricey (project, waits for your approval)"} <= set(items)
    waiting = dlg.template.model().item(dlg.template.findData("pricey"))
    assert not waiting.isEnabled()  # listed, so the person knows of it, but not pickable
    assert dlg.template.currentData() == "gone" and "not found" in dlg.template_about.text()
    assert "cannot allow" in dlg.template_about.text()  # the bad one is named, not listed
    fut = dlg.ask()
    dlg.template.setCurrentIndex(dlg.template.findData("tester"))
    assert "Runs the tests" in dlg.template_about.text()
    dlg._check()
    assert run(fut).settings["template"] == "tester"
    fresh = ProjectSettingsDialog(None)
    qtbot.addWidget(fresh)
    assert fresh.template.currentData() == "coding" and fresh._template_setting(None) == {}


def test_the_workspace_choice_hides_the_host_path_on_request_and_round_trips(qtbot, run, tmp_path, monkeypatch):
    """Issue 23 item 7: a mounted folder's host path is in the container's mountinfo (the kernel's doing); the
    person can choose a synced copy, which hides it (tests/security/test_host_path_hidden.py), and the choice
    is saved and shown again."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    dlg = ProjectSettingsDialog(None, catalog=[])
    qtbot.addWidget(dlg)
    assert dlg.workspace.currentData() == "auto" and "mounted" in dlg.workspace_where.text()
    assert "host path" in dlg.workspace.currentText() and "mountinfo" in dlg.workspace.toolTip()
    fut = dlg.ask()
    dlg.workspace.setCurrentIndex(dlg.workspace.findData("synced"))
    assert "synced" in dlg.workspace_where.text()
    dlg.folder.setText(str(tmp_path))
    dlg._check()
    project: ProjectInfo = run(fut)
    assert project.settings["workspace"] == "synced"
    again = ProjectSettingsDialog(project, catalog=[])
    qtbot.addWidget(again)
    assert again.workspace.currentData() == "synced"
