"""A project's sandbox checked when it is opened or saved, against the real engine: the status bar says red,
amber or green in plain words with the button that fixes it (Build, Pick…, Fix…, Check again), never green for
an image that is not there; a project's own image is built only on the click, then used."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from desktop_app.config import Settings
from desktop_app.core import EventBus, ProjectInfo
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui._builds import image_builds
from tests.conftest import TEST_IMAGE, make_workspace
from tests.ui.fake_desk import FakeDesk

pytestmark = pytest.mark.docker


@pytest.fixture
def desk(qtbot, run, store):
    window = MainWindow()
    qtbot.addWidget(window)
    bus = run(EventBus.open(store))
    controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None),
                                                       api_key_source="env"))
    run(controller.start(check_docker=False))
    yield window, controller
    run(controller.close())


def open_project(run, controller, folder: Path, image: str, **settings) -> ProjectInfo:
    """Store the project, open a session of it, and wait for its sandbox's check (the engine is asked first)."""
    project = ProjectInfo(id=f"prj_{folder.name}_{uuid.uuid4().hex[:8]}", name=folder.name, path=str(folder),
                          image=image, settings=settings)
    run(controller.desk.store.save_project(project))
    run(controller.reload_projects())
    run(controller.new_session(project.id))
    run(controller.checks.check_docker())
    return project


def wait_check(qtbot, run, controller, project: ProjectInfo):
    return run(controller.checks.check_project(controller.window.projects_model.project(project.id)))


def test_ready_only_for_an_image_that_exists(desk, qtbot, run, tmp_path):
    window, controller = desk
    project = open_project(run, controller, make_workspace(tmp_path / "ok"), TEST_IMAGE)
    status = wait_check(qtbot, run, controller, project)
    assert (status.level, status.text) == ("green", "Sandbox ready: agent-desk/minimal")
    assert "Sandbox ready: agent-desk/minimal" in window.status.sandbox.text()
    assert window.status.sandbox_action.isHidden() and "Docker " in window.status.sandbox.toolTip()

    missing = open_project(run, controller, make_workspace(tmp_path / "gone"), "agent-desk/no-such-image:1")
    status = wait_check(qtbot, run, controller, missing)
    assert (status.level, status.text) == ("red", "Image missing: agent-desk/no-such-image:1")
    assert window.status.sandbox_level == "red" and "green" not in window.status.sandbox_level
    assert window.status.sandbox_action.text() == "Pick…" and not window.status.sandbox_action.isHidden()
    assert "Image missing" in window.banner.text()
    opened: list[str] = []

    async def edit_project(pid: str) -> None:  # the dialog itself is tested in dialogs/
        opened.append(pid)

    controller.edit_project = edit_project
    window.status.sandbox_action.click()
    qtbot.waitUntil(lambda: opened == [missing.id])


def test_engine_down_says_so_with_check_again(desk, qtbot, run, tmp_path, monkeypatch):
    window, controller = desk
    folder = make_workspace(tmp_path / "p")
    project = open_project(run, controller, folder, TEST_IMAGE)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    status = wait_check(qtbot, run, controller, project)
    assert (status.level, status.text, status.action) == ("red", "Docker engine not running", "retry")
    assert window.status.sandbox_action.text() == "Check again"
    assert "Docker engine not running" in window.status.sandbox.text()
    monkeypatch.delenv("DOCKER_HOST")
    with qtbot.waitSignal(controller.checks.projectChecked, timeout=30_000) as got:
        window.status.sandbox_action.click()
    assert got.args[1].level == "green" and "Sandbox" not in window.banner.text()


def test_a_root_owned_folder_gets_a_fix_that_says_what_to_run(desk, qtbot, run, tmp_path):
    window, controller = desk
    folder = tmp_path / "rooted"
    folder.mkdir(mode=0o755)
    os.chown(folder, 0, 0)
    project = open_project(run, controller, folder, TEST_IMAGE)
    status = wait_check(qtbot, run, controller, project)
    assert (status.level, status.action) == ("red", "fix")
    assert status.text == "Folder owned by root: the sandbox (uid 1000) cannot write in it"
    assert window.status.sandbox_action.text() == "Fix…"
    window.status.sandbox_action.click()
    box = next(w for w in window.findChildren(QMessageBox) if w.isVisible())
    # the desk runs as root here: chown to root would change nothing, so the fix names the sandbox's user
    assert f"chown -R 1000:1000 {folder}" in box.informativeText()
    assert "read-only" in box.informativeText()
    # read-only workspace: readable is enough
    read_only = ProjectInfo(project.id, project.name, str(folder), TEST_IMAGE, settings={"workspace_ro": True})
    assert run(controller.checks.check_project(read_only)).level == "green"
    # something inside owned by root (an earlier `docker run` as root): amber, with the same fix
    make_workspace(folder)
    (folder / "node_modules").mkdir()
    status = wait_check(qtbot, run, controller, project)
    assert (status.level, status.action) == ("amber", "fix") and "node_modules/" in status.text


def test_a_devcontainer_is_built_on_the_click_then_used_and_a_change_is_shown(desk, qtbot, run, tmp_path,
                                                                           docker_client):
    window, controller = desk
    folder = make_workspace(tmp_path / "devc")
    (folder / ".devcontainer").mkdir()
    (folder / ".devcontainer" / "devcontainer.json").write_text(
        '// JSONC\n{"build": {"dockerfile": "Dockerfile", "args": {"HTTP_PROXY": "http://proxy.example:3128"},},}\n')
    dockerfile = folder / ".devcontainer" / "Dockerfile"
    dockerfile.write_text("FROM agent-desk/base:bookworm\nRUN echo ui > /etc/desk-ui-marker\n")
    for p in (folder / ".devcontainer", dockerfile, folder / ".devcontainer" / "devcontainer.json"):
        os.chown(p, 1000, 1000)
    # chosen as the project's image but never built: red, and Build builds it
    project = open_project(run, controller, folder, "agent-desk/project-devc-00000000:0000000000000000",
                           project_image={"source": ".devcontainer/devcontainer.json", "digest": "none"})
    status = wait_check(qtbot, run, controller, project)
    assert (status.level, status.text, status.action) == ("red", "Image missing: the project's own image", "build")
    assert window.status.sandbox_action.text() == "Build"
    with qtbot.waitSignal(controller.checks.projectChecked, timeout=120_000) as got:
        window.status.sandbox_action.click()
        # the build argument the devcontainer passes is shown before the build starts, and agreed to
        qtbot.waitUntil(lambda: _shown_box("BuildArgumentsBox") is not None)
        box = _shown_box("BuildArgumentsBox")
        assert "HTTP_PROXY=http://proxy.example:3128" in box.informativeText()
        assert not image_builds().running()  # nothing started yet
        next(b for b in box.buttons() if b.text() == "Build").click()
    assert got.args[1].level == "green", got.args[1]
    log = controller.checks.build_log
    assert log is not None and "Successfully tagged" in log.log.toPlainText() and "Built agent-desk/project-" in \
        log.heading.text()
    stored = run(controller.desk.store.list_projects())[0]
    assert stored.image.startswith("agent-desk/project-devc-") and docker_client.images.get(stored.image)
    assert stored.settings["project_image"]["source"] == ".devcontainer/devcontainer.json"
    assert window.projects_model.project(project.id).image == stored.image
    # the agent (or anyone) edits the Dockerfile: shown, not built
    dockerfile.write_text(dockerfile.read_text() + "RUN true\n")
    status = wait_check(qtbot, run, controller, stored)
    assert (status.level, status.text) == ("amber", "Dockerfile changed since the build: Build again")
    assert window.status.sandbox_action.text() == "Build"
    assert [t for i in docker_client.images.list(name=stored.image.rpartition(":")[0]) for t in i.tags] == [
        stored.image]
    log.close()
    docker_client.images.remove(stored.image)


def test_a_sandbox_error_in_the_window_offers_its_fix(desk, qtbot, run, tmp_path):
    window, controller = desk
    from desktop_app.core import SandboxError

    project = open_project(run, controller, make_workspace(tmp_path / "p"), "agent-desk/no-such-image:2")
    wait_check(qtbot, run, controller, project)
    window.banner.clear_item("sandbox")
    with qtbot.waitSignal(controller.checks.projectChecked, timeout=30_000):
        controller._report(SandboxError("the sandbox image agent-desk/no-such-image:2 is not on this machine"))
    assert "Image missing" in window.banner.text() and window.status.sandbox_action.text() == "Pick…"
    assert json.dumps(window.banner.text())  # one readable line of text, no traceback


def _shown_box(name: str):
    from PySide6.QtWidgets import QApplication

    return next((w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.objectName() == name
                 and w.isVisible()), None)
