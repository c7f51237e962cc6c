"""The main window's own behaviour: the input box keys, and the first-run banner that says what is missing."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop_app.config import Settings
from desktop_app.core import EventBus
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui._mainwindow import PromptEdit
from tests.ui.fake_desk import FakeDesk


def test_enter_sends_shift_enter_adds_a_line_escape_interrupts(qtbot):
    edit = PromptEdit()
    qtbot.addWidget(edit)
    sent: list[str] = []
    stops: list[bool] = []
    edit.submitted.connect(sent.append)
    edit.interruptRequested.connect(lambda: stops.append(True))
    qtbot.keyClicks(edit, "first line")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "second")
    assert not sent and edit.toPlainText() == "first line\nsecond"
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert sent == ["first line\nsecond"] and edit.toPlainText() == ""
    qtbot.keyClick(edit, Qt.Key.Key_Escape)
    assert stops == [True]


def test_first_run_without_key_or_docker_says_what_to_do(qtbot, run, store, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    window = MainWindow()
    qtbot.addWidget(window)
    bus = run(EventBus.open(store))
    controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None)))
    run(controller.start(check_docker=False))
    assert not run(controller.checks.check_docker())
    text = window.banner.text()
    assert "No API key" in text and "Docker: not available" in text and "No project yet" in text
    assert "Docker engine not running" in window.status.sandbox.text()
    assert window.status.sandbox_action.text() == "Check again"  # the fix is a button, not a CLI flag
    history = controller.open_history()  # the history still works
    qtbot.addWidget(history)
    run(controller.history_loading)
    assert history.model.total == 0 and "0 records" in history.status.text()
