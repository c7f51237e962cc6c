"""Help › About (version and paths), the status bar's key source, and the first-run banner's "Check setup…",
which runs the doctor's checks off the GUI thread and shows them with their fixes."""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton

from desktop_app import __version__
from desktop_app.config import Settings
from desktop_app.core import EventBus
from desktop_app.logs import log_file
from desktop_app.ui import AppController, MainWindow
from tests.ui.fake_desk import FakeDesk


def _controller(qtbot, run, store, key_source=None):
    window = MainWindow()
    qtbot.addWidget(window)
    bus = run(EventBus.open(store))
    controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None),
                                                       api_key_source=key_source))
    return window, controller


def test_about_shows_the_version_and_the_folders(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path / "data"))
    window, controller = _controller(qtbot, run, store)
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    titles = [a.text() for a in help_menu.actions() if a.text()]  # (separators have none)
    assert titles == ["Keyboard shortcuts", "Check setup…", "About Agent Desk"]
    dlg = controller.show_about()
    qtbot.addWidget(dlg)
    text = dlg.label.text()
    assert __version__ in text and str(log_file()) in text and str(tmp_path / "data") in text


def test_the_status_bar_says_where_the_key_and_endpoint_come_from(qtbot, run, store, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.example")
    window, controller = _controller(qtbot, run, store, key_source="env")
    run(controller.start(check_docker=False))
    assert window.status.key.text() == "key: ANTHROPIC_API_KEY"
    tip = window.status.key.toolTip()
    assert "from ANTHROPIC_API_KEY" in tip and "http://gateway.example (from ANTHROPIC_BASE_URL" in tip


def test_the_banner_runs_the_setup_checks_off_the_gui_thread(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    window, controller = _controller(qtbot, run, store)
    controller.db_url = str(tmp_path / "not-yet.db")
    run(controller.start(check_docker=False))
    buttons = [b.text() for b in window.banner.findChildren(QPushButton)]
    assert "Check setup…" in buttons
    checks = run(controller.run_setup_checks(), timeout=60_000)
    names = {c.name: c for c in checks}
    assert names["Docker engine"].status == "fail" and names["API key"].status == "fail"
    shown = controller.checks_dialog.view.toPlainText()
    assert "check(s) failed" in shown and "fix: set it in the window" in shown and "Docker engine" in shown
