"""An image build, for real: started from the project dialog, its devcontainer's build arguments shown before it
starts, its elapsed time, the status bar's indicator while it runs (after the dialog is closed too), a reopened
dialog showing it, and Cancel stopping it mid-step (the engine kills the step's container; nothing is tagged).
A project with both a Dockerfile and a devcontainer lists both and says which one is used and why."""

from __future__ import annotations

import json
import uuid

import pytest

from desktop_app.core import ProjectInfo
from desktop_app.ui import MainWindow
from desktop_app.ui._builds import image_builds
from desktop_app.ui.dialogs import ProjectSettingsDialog
from desktop_app.ui.dialogs._project import build_project_image, project_image_entry

pytestmark = pytest.mark.usefixtures("desk_env")


def _step_container(docker_client, marker: str):
    """The container the build runs its `RUN sleep` step in (a running one first; None when there is none)."""
    found = [c for c in docker_client.containers.list(all=True, ignore_removed=True)
             if marker in " ".join(c.attrs.get("Config", {}).get("Cmd") or [])]
    return next((c for c in found if c.status == "running"), found[0] if found else None)


def test_a_build_is_shown_everywhere_and_cancel_stops_it_for_real(qtbot, run, tmp_path, docker_client):
    marker = f"desk-cancel-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "slow"
    (folder / ".devcontainer").mkdir(parents=True)
    (folder / ".devcontainer" / "devcontainer.json").write_text(json.dumps(
        {"build": {"dockerfile": "Dockerfile", "args": {"HTTP_PROXY": "http://proxy.example:3128"}}}))
    (folder / ".devcontainer" / "Dockerfile").write_text(
        f"FROM agent-desk/base:bookworm\nARG HTTP_PROXY\nRUN sleep 300 # {marker}\n")
    project = ProjectInfo("prj_slow", "slow", str(folder))
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    entry = project_image_entry(project)
    # before anything is built: the build argument the devcontainer passes is on screen
    dlg = ProjectSettingsDialog(project, catalog=[entry], build_project_image=build_project_image, parent=window)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.image.setCurrentText(entry["tag"])
    assert "HTTP_PROXY=http://proxy.example:3128" in dlg.image_status.text()
    dlg.build_btn.click()
    qtbot.waitUntil(lambda: _step_container(docker_client, marker) is not None, timeout=120_000)
    assert "build argument from .devcontainer/devcontainer.json: HTTP_PROXY=" in dlg.build_log.toPlainText()
    assert dlg.cancel_build_btn.isVisible() and dlg.build_elapsed.text().startswith("elapsed 0:")
    bar = window.status.builds
    assert bar.isVisible() and "Building the project's image for slow" in bar.text()
    # the dialog is closed: the build goes on, the status bar still says so
    dlg.reject()
    dlg.stop_following_builds()
    qtbot.waitUntil(lambda: not dlg.isVisible())
    [build] = image_builds().running()
    assert bar.isVisible() and _step_container(docker_client, marker).status == "running"
    # reopened: the running build is shown, with its Cancel
    again = ProjectSettingsDialog(project, catalog=[project_image_entry(project)],
                                  build_project_image=build_project_image, parent=window)
    qtbot.addWidget(again)
    again.show()
    again.image.setCurrentText(entry["tag"])
    assert "building" in again.image_status.text() and again.build_btn.text() == "Show build…"
    assert again.cancel_build_btn.isVisible()
    bar.click()  # the status bar opens the build's log, every line so far in it
    log = build.dialog
    qtbot.waitUntil(lambda: log is not None and log.isVisible())
    assert marker in log.log.toPlainText() and log.cancel_btn.isEnabled()
    assert log.elapsed.text().startswith("elapsed 0:")
    for name, widget in (("project-dialog", again), ("build-log", log), ("window", window)):
        path = tmp_path / f"building-{name}.png"
        assert widget.grab().save(str(path))
        print(f"screenshot artifact: {path}")
    again.cancel_build_btn.click()
    qtbot.waitUntil(lambda: not build.running, timeout=60_000)
    assert build.ok is False and build.message.startswith("Cancelled after")
    assert "Cancelled after" in log.heading.text() and not log.cancel_btn.isEnabled()
    qtbot.waitUntil(lambda: (c := _step_container(docker_client, marker)) is None or c.status != "running",
                    timeout=60_000)  # the engine stopped the step: no sleep left running
    qtbot.waitUntil(lambda: not bar.isVisible())
    assert not again.cancel_build_btn.isVisible() and again.build_btn.text() == "Build"
    assert "cancelled" in again.image_status.text()
    assert not docker_client.images.list(name="agent-desk/project-slow-*")
    # built again, then the window quits mid-build: the build is stopped for real, the quit is not held
    again.build_btn.click()
    qtbot.waitUntil(lambda: (c := _step_container(docker_client, marker)) is not None and c.status == "running",
                    timeout=120_000)
    [second] = image_builds().running()
    image_builds().cancel_all()  # what the controller's close does
    qtbot.waitUntil(lambda: not second.running, timeout=60_000)
    assert second.message.startswith("Cancelled after")
    qtbot.waitUntil(lambda: (c := _step_container(docker_client, marker)) is None or c.status != "running",
                    timeout=60_000)
    # a Dockerfile beside the devcontainer: both listed, which one is used and why
    (folder / ".agent-desk").mkdir()
    (folder / ".agent-desk" / "Dockerfile").write_text("FROM agent-desk/base:bookworm\n")
    files = project_image_entry(project)["files"]
    assert ".agent-desk/Dockerfile</code> — <b>used: the desk's own Dockerfile comes before a devcontainer" in files
    assert ".devcontainer/devcontainer.json</code> — not used: .agent-desk/Dockerfile comes first" in files
    log.close()
