import pytest
from PySide6.QtCore import Qt
from desktop_app.config import DEFAULT_MODEL, Settings
from desktop_app.core import EventBus, ProjectInfo
from desktop_app.runtime import ProjectRuntimes
from desktop_app.ui import AppController, MainWindow
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use, HttpError


def open_app(qtbot, run, store, server):
    settings = Settings(path=None, base_url=server.url, api_key=server.api_key, model=DEFAULT_MODEL)
    bus = run(EventBus.open(store))
    window = MainWindow(); qtbot.addWidget(window)
    factory = ProjectRuntimes(settings=settings, store=store, bus=bus)
    c = AppController(window, store=store, bus=bus, settings=settings, agent_factory=factory, api_key_source="settings")
    window.show()
    return window, c, factory


def test_repro(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "p"; folder.mkdir()
    project = ProjectInfo("prj_1", "demo", str(folder), permission_mode="auto", settings={"sandbox": "local"})
    script = [reply(text("ok"), tool_use("bash_run", {"command": "echo hi"}, id="t1")), reply(text("done")),
              HttpError(400, "invalid_request_error", "bad thing")]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        w, c, f = open_app(qtbot, run, store, server)
        run(c.start(check_docker=False))
        run(c.send("first prompt here"))
        run(c.send("second"))
        print("HEADER", w.session_label.text())
        print("STATUS", w.status.usage.text())
        print("CONV1", w.conversation.toPlainText())
        run(store.flush())
        run(c.close()); run(f.close())
        w2, c2, f2 = open_app(qtbot, run, store, server)
        run(c2.start(check_docker=False))
        print("HEADER2", w2.session_label.text(), [s.title for s in c2.sessions.values()])
        print("STATUS2", w2.status.usage.text())
        print("CONV2", w2.conversation.toPlainText())
        run(c2.close()); run(f2.close())
