"""The whole window in this process against the fake Anthropic server: the app opened on a store as the real
entry point wires it, and a timeline row's state."""

from __future__ import annotations

from desktop_app.config import DEFAULT_MODEL, Settings
from desktop_app.core import EventBus
from desktop_app.runtime import Desk
from desktop_app.ui import AppController, MainWindow


def open_app(qtbot, run, store, server, project):
    """(window, controller, desk) of the app on `store`, talking to `server`; the window shown."""
    settings = Settings(path=None, base_url=server.url, api_key=server.api_key, model=DEFAULT_MODEL)
    bus = run(EventBus.open(store))
    window = MainWindow()
    qtbot.addWidget(window)
    desk = Desk(settings=settings, store=store, bus=bus, api_key_source="settings")
    controller = AppController(window, desk)
    window.show()
    return window, controller, desk


def row_state(window, call_id):
    """The state of the call's timeline row (its value), or None when it has no row."""
    model = window.timeline_model
    row = model.row_of(call_id)
    return model.row_at(row).state.value if row >= 0 else None
