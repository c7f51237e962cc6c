"""The first hour, scripted: a person's first launch, the settings, a project and its image, a prompt, an
approval from the diff, a denial with a note, a quit with a call in flight, a reopen, and the history with
export and verify, asserting at each step what the person sees. Against the local Anthropic-compatible
server and the real Docker sandbox."""

from __future__ import annotations

import json
import uuid

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from desktop_app.config import Settings
from desktop_app.core import EventBus, ToolCallState
from desktop_app.runtime import Desk
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui.dialogs._project import ProjectSettingsDialog
from desktop_app.ui.dialogs._settings import SettingsDialog
from tests.conftest import TEST_IMAGE, remove_project
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.lifecycle_kit import answer, quit_dialog

pytestmark = [pytest.mark.e2e, pytest.mark.docker]


def _dialog(cls):
    return next((w for w in QApplication.topLevelWidgets() if isinstance(w, cls) and w.isVisible()), None)


def _save(dlg) -> None:
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Save).click()


def _window(qtbot, run, store, settings, key_source):
    bus = run(EventBus.open(store))
    window = MainWindow()
    qtbot.addWidget(window)
    factory = Desk(settings=settings, store=store, bus=bus, api_key_source=key_source)
    controller = AppController(window, factory)
    window.quit_guard = controller.quit.guard  # as app.py wires it
    window.show()
    return window, controller, factory


def _state(window, cid):
    row = window.timeline_model.row_of(cid)
    return window.timeline_model.row_at(row).state if row >= 0 else None


def _first_launch_and_settings(qtbot, run, window, controller, server):
    run(controller.start(check_docker=False))
    banner = window.banner.text()
    assert "No API key" in banner and "No project yet" in banner
    assert window.status.key.text() == "key: not set"
    task = controller.tasks.spawn(controller.edit_settings())
    qtbot.waitUntil(lambda: _dialog(SettingsDialog) is not None, timeout=10_000)
    dlg = _dialog(SettingsDialog)
    dlg.base_url.setText(server.url)
    dlg.key.setText(server.api_key)
    _save(dlg)
    qtbot.waitUntil(task.done, timeout=20_000)
    assert task.result() is not None
    assert "No API key" not in window.banner.text()
    assert window.status.key.text() == "key: settings file"


def _new_project(qtbot, run, window, controller, folder):
    task = controller.tasks.spawn(controller.edit_project(None))
    qtbot.waitUntil(lambda: _dialog(ProjectSettingsDialog) is not None, timeout=30_000)
    dlg = _dialog(ProjectSettingsDialog)
    dlg.folder.setText(str(folder))
    dlg.name.setText("first-hour")
    dlg.image.setCurrentText(TEST_IMAGE)
    _save(dlg)
    qtbot.waitUntil(task.done, timeout=30_000)
    project = task.result()
    assert project is not None and project.image == TEST_IMAGE
    assert "No project yet" not in window.banner.text()
    assert window.session_label.text().startswith("first-hour › ")
    assert TEST_IMAGE in window.status.sandbox.text()  # the project in view, before anything runs
    return project


def _approve_from_the_diff(qtbot, window, controller, folder):
    window.prompt.setPlainText("Add a greeting file, then clean up, then run the slow build.")
    qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=120_000)
    item = window.inbox.model.item(0)
    assert item.name == "fs_write"
    window.inbox.list.setCurrentIndex(window.inbox.model.index(0))
    qtbot.waitUntil(lambda: "+hello from the first hour" in window.inbox.card.toPlainText(), timeout=30_000)
    assert not (folder / "greeting.txt").exists()
    window.inbox.allow_selected()
    qtbot.waitUntil(lambda: (folder / "greeting.txt").exists(), timeout=60_000)
    assert (folder / "greeting.txt").read_text() == "hello from the first hour\n"
    qtbot.waitUntil(lambda: _state(window, item.call_id) is ToolCallState.COMPLETED, timeout=30_000)
    return item.call_id


def _deny_with_a_note(qtbot, window, server):
    qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=60_000)
    item = window.inbox.model.item(0)
    assert item.name == "bash_run" and item.input == {"command": "rm -rf build"}
    window.inbox.list.setCurrentIndex(window.inbox.model.index(0))
    window.inbox.note.setText("keep the build folder, I need it")
    window.inbox.deny_selected()
    qtbot.waitUntil(lambda: _state(window, item.call_id) is ToolCallState.DENIED, timeout=30_000)
    # the model reads the note in the call's result
    qtbot.waitUntil(lambda: len(server.requests) >= 3, timeout=60_000)
    results = [b for m in server.requests[2].body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert "keep the build folder, I need it" in json.dumps(results[-1])
    return item.call_id


def _quit_with_a_call_in_flight(qtbot, run, window, controller, factory):
    qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=60_000)
    window.inbox.list.setCurrentIndex(window.inbox.model.index(0))
    window.inbox.allow_selected()  # the slow build: running when the person quits
    qtbot.waitUntil(lambda: bool(controller.running_calls.running), timeout=60_000)
    [cid] = controller.running_calls.running
    with qtbot.waitSignal(window.closed, timeout=30_000):
        window.quit_act.trigger()  # Ctrl+Q
        qtbot.waitUntil(lambda: quit_dialog() is not None, timeout=10_000)
        assert "running: bash_run sleep 300" in quit_dialog().informativeText()
        answer(quit_dialog(), "Quit anyway")
    run(controller.close(), timeout=60_000)  # what app.py does once the window has closed, in this order
    run(factory.close(), timeout=120_000)
    return cid


def test_the_first_hour(qtbot, run, store, tmp_path, desk_env, monkeypatch, docker_client):
    folder = tmp_path / f"ws-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    folder.chmod(0o777)  # the sandbox user (uid 1000) writes here
    script = [
        reply(text("I will add the greeting."),
              tool_use("fs_write", {"path": "greeting.txt", "content": "hello from the first hour\n"}, id="tu_w")),
        reply(text("Now the clean-up."), tool_use("bash_run", {"command": "rm -rf build"}, id="tu_rm")),
        reply(text("Understood, the build folder stays. Now the slow build."),
              tool_use("bash_run", {"command": "sleep 300"}, id="tu_sleep")),
        reply(text("unused")),
    ]
    settings = Settings(path=tmp_path / "cfg" / "settings.json")
    project = None
    try:
        with AnthropicServer(script) as server:
            window, controller, factory = _window(qtbot, run, store, settings, None)   # 1. first launch
            _first_launch_and_settings(qtbot, run, window, controller, server)          # 2. settings
            project = _new_project(qtbot, run, window, controller, folder)              # 3. project, image
            sid = controller.current_session
            write = _approve_from_the_diff(qtbot, window, controller, folder)          # 4, 5. prompt, diff
            denied = _deny_with_a_note(qtbot, window, server)                          # 6. denial, note
            title = window.session_label.text()
            slow = _quit_with_a_call_in_flight(qtbot, run, window, controller, factory)  # 7. quit
            assert not window.isVisible()

            # 8. a reopen: a new window on the same store and settings
            window2, controller2, factory2 = _window(qtbot, run, store, settings, "settings")
            run(controller2.start(check_docker=False))
            assert controller2.current_session == sid
            assert window2.session_label.text() == title
            assert title == "first-hour › Add a greeting file, then clean up, then run the slow build."
            assert _state(window2, write) is ToolCallState.COMPLETED
            assert _state(window2, denied) is ToolCallState.DENIED
            assert _state(window2, slow) is ToolCallState.SEALED  # sealed at once, nobody had to send
            shown = window2.conversation.toPlainText()
            assert "fs_write  greeting.txt  done" in shown and "bash_run  rm -rf build  denied" in shown
            assert "bash_run  sleep 300  interrupted" in shown
            assert "The app stopped while 1 call was running: bash_run sleep 300" in shown
            assert window2.inbox.model.rowCount() == 0

            # 9. the history: the three calls, an export, and the chain verified
            history = controller2.open_history()
            qtbot.addWidget(history)
            qtbot.waitUntil(lambda: controller2.history_loading.done(), timeout=30_000)
            assert history.model.total == 3
            out = tmp_path / "export.jsonl"
            assert run(history.export(str(out))) == 3
            exported = [json.loads(line) for line in out.read_text().splitlines()]
            assert {r["id"] for r in exported} == {write, denied, slow}
            result = run(history.verify(), timeout=60_000)
            assert result.ok, result
            run(controller2.close())
            run(factory2.close(), timeout=120_000)
    finally:
        if project is not None:
            remove_project(docker_client, project.id)
