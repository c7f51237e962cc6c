"""Builders for the lifecycle tests: the window on a real store and the local Anthropic server, the quit
question found and answered as a person would, and the app launched as its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton

from desktop_app.config import DEFAULT_MODEL, Settings
from desktop_app.core import EventBus
from desktop_app.runtime import Desk
from desktop_app.ui import AppController, MainWindow
from tests.kit import isolated_environ
from tests.kit import wait_until as poll_until

ROOT = Path(__file__).resolve().parents[2]


def open_app(qtbot, run, store, server, *, guard: bool = True):
    """The window as app.py composes it (with the quit guard), on `store`, talking to `server`."""
    settings = Settings(path=None, base_url=server.url, api_key=server.api_key, model=DEFAULT_MODEL)
    bus = run(EventBus.open(store))
    window = MainWindow()
    qtbot.addWidget(window)
    factory = Desk(settings=settings, store=store, bus=bus, api_key_source="settings")
    controller = AppController(window, factory)
    if guard:
        window.quit_guard = controller.quit.guard
    window.show()
    return window, controller, factory


def quit_dialog() -> QMessageBox | None:
    for w in QApplication.topLevelWidgets():
        if isinstance(w, QMessageBox) and w.objectName() == "QuitDialog" and w.isVisible():
            return w
    return None


def answer(box: QMessageBox, label: str) -> None:
    """Click the dialog's button that reads `label`."""
    [button] = [b for b in box.findChildren(QPushButton) if b.text() == label]
    button.click()


def app_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The environment of a real `agent-desk` process of its own: own config, data and socket folders."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700, exist_ok=True)
    no_display = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    return isolated_environ(tmp_path, no_display, XDG_RUNTIME_DIR=str(xdg), QT_QPA_PLATFORM="offscreen",
                            PYTHONPATH=str(ROOT), **more)


def launch(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kw)


def wait_until(predicate, timeout_s: float, proc: subprocess.Popen | None = None, what: str = "") -> None:
    """Poll `predicate` (a file to appear, a socket to answer) while the process lives."""

    def done() -> bool:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the app ended ({proc.returncode}) before {what}: {proc.stderr.read()}")
        return False

    if not poll_until(done, timeout_s, every_s=0.2):
        raise AssertionError(f"timed out waiting for {what}")


def window_answers(env: dict[str, str]) -> bool:
    """Whether the app's window takes messages on its single-instance socket (its loop runs)."""
    out = subprocess.run([sys.executable, "-c", "from desktop_app.ui import send_to_running; import sys;"
                          "sys.exit(0 if send_to_running({'ping': '1'}) == 'ok' else 1)"],
                         env=env, capture_output=True, timeout=30)
    return out.returncode == 0
