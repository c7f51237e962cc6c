"""Moving around the window: another session shows its own details and its project's sandbox, a refused
prompt stays in the box, an error is one line with a Retry that runs the step again, titles are stored and
renamed from the sidebar, and the shortcuts (Ctrl+, Ctrl+H, Esc, F1, F2) and the Help menu are there."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QApplication, QInputDialog, QMessageBox

from desktop_app.core import AgentDeskError, ProjectInfo
from desktop_app.ui._controller import title_from
from tests.fakes.anthropic_server import AnthropicServer, HttpError, reply, text, tool_use
from tests.ui.lifecycle_kit import open_app

KEY = "sk-ant-api03-" + "Q" * 40  # a key-shaped secret pasted into a prompt


def _project(tmp_path, name, **kw):
    folder = tmp_path / name
    folder.mkdir()
    return ProjectInfo(f"prj_{name}", name, str(folder), **kw)


def _visible(cls, name):
    return next((w for w in QApplication.topLevelWidgets()
                 if isinstance(w, cls) and w.objectName() == name and w.isVisible()), None)


def test_another_session_shows_its_own_details_and_its_project_s_sandbox(qtbot, run, store, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    local = _project(tmp_path, "alpha", permission_mode="auto", settings={"sandbox": "local"})
    docker = _project(tmp_path, "beta", image="agent-desk/minimal:latest")
    script = [reply(tool_use("bash_run", {"command": "echo hi"}, id="t1")), reply(text("done"))]
    with AnthropicServer(script) as server:
        run(store.save_project(local))
        run(store.save_project(docker))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        a = run(controller.new_session(local.id))
        run(controller.send("run it"), timeout=60_000)
        assert window.timeline_model.rowCount() == 1
        cid = window.timeline_model.row_at(0).call_id
        assert window.timeline.select_call(cid)
        qtbot.waitUntil(lambda: "echo hi" in window.timeline.details.toPlainText(), timeout=10_000)
        assert "UNSANDBOXED" in window.status.sandbox.text()  # alpha's open (local) sandbox

        b = run(controller.new_session(docker.id))
        assert window.timeline.current_call() is None and window.timeline.details.toPlainText() == ""
        assert "agent-desk/minimal:latest" in window.status.sandbox.text()
        assert "UNSANDBOXED" not in window.status.sandbox.text()  # beta's, not alpha's

        window.sidebar.select_session(a.id)
        qtbot.waitUntil(lambda: controller.current_session == a.id, timeout=10_000)
        qtbot.waitUntil(lambda: "UNSANDBOXED" in window.status.sandbox.text(), timeout=10_000)
        assert window.timeline.details.toPlainText() == ""  # nothing selected in this session yet
        assert b.id != a.id
        run(controller.close())
        run(factory.close())


def test_a_refused_prompt_stays_in_the_box(qtbot, run, store, tmp_path):
    with AnthropicServer([]) as server:
        window, controller, _ = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        window.prompt.setPlainText("this must not be lost")
        window._send_clicked()  # no project yet: refused
        qtbot.waitUntil(lambda: window.prompt.toPlainText() == "this must not be lost", timeout=5_000)
        assert "Add a project first" in window.conversation.toPlainText()
        # what the person typed since is never overwritten
        task = controller.tasks.spawn(controller.send("another"))
        window.prompt.setPlainText("typed meanwhile")
        qtbot.waitUntil(task.done, timeout=5_000)
        assert isinstance(task.exception(), AgentDeskError)
        assert window.prompt.toPlainText() == "typed meanwhile"
        run(controller.close())


def test_one_error_line_and_retry_runs_the_step_again(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    project = _project(tmp_path, "gamma", settings={"sandbox": "local"})
    script = [HttpError(400, "invalid_request_error", "the endpoint said no"), reply(text("Second time lucky."))]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        run(controller.new_session(project.id))
        run(controller.send("hello"), timeout=60_000)
        conv = window.conversation
        assert conv.toPlainText().count("the endpoint said no") == 1 and conv.has_retry()
        assert "↻ Retry" in conv.toPlainText()
        with qtbot.waitSignal(controller.turnFinished, timeout=60_000):
            conv.anchorClicked.emit(QUrl("retry:"))
        qtbot.waitUntil(lambda: "Second time lucky." in conv.toPlainText(), timeout=10_000)
        shown = conv.toPlainText()
        assert shown.count("the endpoint said no") == 1 and "↻ Retry" not in shown and not conv.has_retry()
        assert shown.count("hello") == 1  # the step ran again; the message was not sent twice
        first, second = (r.body["messages"] for r in server.requests)
        assert first == second and [[b["text"] for b in m["content"]] for m in first] == [["hello"]]
        run(controller.close())
        run(factory.close())


def test_titles_are_stored_redacted_and_renamed_from_the_sidebar(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    project = _project(tmp_path, "delta", settings={"sandbox": "local"})
    with AnthropicServer([reply(text("ok"))]) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        session = run(controller.new_session(project.id))
        run(controller.send(f"deploy with {KEY}\nand more lines"), timeout=60_000)
        stored = run(store.get_session(session.id))
        assert KEY not in stored.title and stored.title.startswith("deploy with ")
        assert KEY not in str(run(store.messages(session.id))[0].content)
        assert window.session_label.text() == f"delta › {stored.title}"

        task = controller.tasks.spawn(controller.rename_session(session.id))
        qtbot.waitUntil(lambda: _visible(QInputDialog, "AskText") is not None, timeout=5_000)
        dlg = _visible(QInputDialog, "AskText")
        dlg.setTextValue("  Release\nnotes   for 2.0 ")
        dlg.accept()
        qtbot.waitUntil(task.done, timeout=5_000)
        assert run(store.get_session(session.id)).title == "Release notes for 2.0"
        assert window.session_label.text() == "delta › Release notes for 2.0"
        assert window.projects_model.session_index(session.id).data() == "Release notes for 2.0"

        task = controller.tasks.spawn(controller.rename_session(session.id))  # blank: the old name stays
        qtbot.waitUntil(lambda: _visible(QInputDialog, "AskText") is not None, timeout=5_000)
        _visible(QInputDialog, "AskText").setTextValue("   ")
        _visible(QInputDialog, "AskText").accept()
        qtbot.waitUntil(task.done, timeout=5_000)
        assert run(store.get_session(session.id)).title == "Release notes for 2.0"

        # F2 in the sidebar asks for the name; F2 elsewhere (the prompt box) does nothing
        with qtbot.waitSignal(window.sidebar.renameRequested, timeout=2_000) as asked:
            window.sidebar.tree.setFocus()
            window.sidebar._rename_current()
        assert asked.args == [session.id]
        run(controller.close())
        run(factory.close())


def test_title_from_a_prompt():
    assert title_from("fix the build") == "fix the build"
    assert title_from("\n\n  first   line \nsecond") == "first line"
    long = title_from("word " * 40)
    assert len(long) <= 61 and long.endswith("…") and not long.startswith(" ")
    assert title_from("x" * 500).endswith("…") and len(title_from("x" * 500)) == 61
    assert title_from("") == ""


def test_shortcuts_and_the_help_menu(qtbot, run, store, tmp_path):
    with AnthropicServer([]) as server:
        window, controller, _ = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        assert "Ctrl+," in [s.toString() for s in window.settings_act.shortcuts()]
        assert window.history_act.shortcut().toString() == "Ctrl+H"
        assert window.quit_act.shortcut().toString() == "Ctrl+Q"
        titles = [a.text() for a in window.help_menu.actions() if a.text()]
        assert titles == ["Keyboard shortcuts", "Check setup…", "About Agent Desk"]
        menus = [a.text() for a in window.menuBar().actions()]
        assert menus == ["&File", "&View", "&Breakpoints", "&Help"]  # the README names View › Audit history

        box = controller.show_shortcuts()
        assert isinstance(box, QMessageBox)
        for keys in ("Ctrl+,", "Ctrl+H", "Esc", "F1", "F2", "Ctrl+Q", "Ctrl+N"):
            assert f"<b>{keys}</b>" in box.text()
        box.close()

        history = controller.open_history()
        qtbot.waitExposed(history)
        history.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is history, timeout=5_000)
        qtbot.keyClick(QApplication.focusWidget() or history, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: not history.isVisible(), timeout=5_000)
        run(controller.close())


def test_a_prompt_goes_to_the_session_it_was_typed_in(qtbot, run, store, tmp_path, monkeypatch):
    """Enter, then at once a click on another session: the message belongs to the first one."""
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    project = _project(tmp_path, "eps", settings={"sandbox": "local"})
    with AnthropicServer([reply(text("answered in A"))]) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        a = run(controller.new_session(project.id))
        b = run(controller.new_session(project.id))
        run(controller.select_session(a.id))
        sent = controller.tasks.spawn(controller.send("meant for A"))
        switched = controller.tasks.spawn(controller.select_session(b.id))
        qtbot.waitUntil(lambda: sent.done() and switched.done(), timeout=60_000)
        assert [m.content[0]["text"] for m in run(store.messages(a.id)) if m.role == "user"] == ["meant for A"]
        assert run(store.messages(b.id)) == []
        assert "meant for A" not in window.conversation.toPlainText()  # B is in view
        assert run(store.get_session(a.id)).title == "meant for A" and run(store.get_session(b.id)).title == ""
        run(controller.close())
        run(factory.close())
