"""The main path by keys only, as a person without a mouse walks it: pick the project, Ctrl+N, type a prompt,
Ctrl+Enter, Ctrl+I to the waiting call, A to allow, and read the result in the conversation: a command that exits
1 is a red "✗ exit 1" with its first error line, never a green "done". Every key goes to the widget that has the
focus (QTest key events, offscreen), so a key that lands in the wrong field fails the test."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.window_kit import open_app, row_state

pytestmark = pytest.mark.e2e

COMMAND = "python3 -c 'import agent_desk_no_such_module'"
CTRL = Qt.KeyboardModifier.ControlModifier


def _press(qtbot, key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    """One key to whatever has the focus now (as a keyboard does)."""
    target = QApplication.focusWidget()
    assert target is not None, "nothing has the focus"
    qtbot.keyClick(target, key, modifier)


def test_type_send_approve_and_read_the_result_by_keys_only(qtbot, run, store, window_project):
    _folder, project = window_project
    script = [reply(text("Let me check."), tool_use("bash_run", {"command": COMMAND}, id="toolu_k1")),
              reply(text("The module is not installed."))]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        qtbot.waitUntil(lambda: window.projects_model.rowCount() == 1)

        window.sidebar.tree.setFocus()  # where Tab from the sidebar's search lands; the project is its first row
        _press(qtbot, Qt.Key.Key_Down)
        assert window.sidebar.current_project_id() == project.id
        _press(qtbot, Qt.Key.Key_N, CTRL)  # a new session: the focus goes to its prompt
        qtbot.waitUntil(lambda: controller.current_session is not None and window.prompt.hasFocus())

        qtbot.keyClicks(QApplication.focusWidget(), "Is the module there?")
        with qtbot.waitSignal(controller.turnFinished, timeout=60_000):
            _press(qtbot, Qt.Key.Key_Return, CTRL)  # Ctrl+Enter sends
            qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=30_000)
            assert window.prompt.toPlainText() == ""
            cid = window.inbox.model.item(0).call_id
            assert row_state(window, cid) == "APPROVAL_REQUIRED"
            _press(qtbot, Qt.Key.Key_I, CTRL)  # from the prompt to the first waiting card
            assert window.inbox.list.hasFocus() and window.inbox.list.currentIndex().row() == 0
            _press(qtbot, Qt.Key.Key_A)  # allow, the key shown on the button
        assert window.inbox.model.rowCount() == 0
        conv = window.conversation
        # the end event says "✗ exit 1" at once; the reason comes with the call's record, fetched after it
        def told() -> bool:
            lines = conv.card_text(cid).splitlines()
            return "✗ exit 1" in lines[0] and len(lines) > 1 and "No module named" in lines[1]

        qtbot.waitUntil(told, timeout=15_000)
        card = conv.card_text(cid)
        assert "No module named 'agent_desk_no_such_module'" in card.splitlines()[1]  # the reason, one line
        assert "done" not in card and "✓" not in card
        qtbot.waitUntil(lambda: "The module is not installed." in conv.toPlainText(), timeout=15_000)
        run(controller.close())
        run(factory.close())


def test_tab_from_the_prompt_reaches_the_inbox(qtbot, qloop):
    from desktop_app.ui import MainWindow
    from desktop_app.ui.inbox import PendingApproval

    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.inbox.add(PendingApproval("c1", "s", "bash_run", {"command": "make"}, risk="medium", reason="asks"))
    window.prompt.setFocus()
    seen = []
    for _ in range(8):  # prompt -> Send -> (Stop is off) -> the mode -> the inbox's list
        _press(qtbot, Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
        if seen[-1] is window.inbox.list:
            break
    assert window.inbox.list in seen, [type(w).__name__ for w in seen]
    assert len(seen) <= 4


def test_the_f1_list_names_the_approval_keys_and_the_buttons_show_them(qtbot, qloop):
    from desktop_app.ui import MainWindow
    from desktop_app.ui._mainwindow import SHORTCUTS

    window = MainWindow()
    qtbot.addWidget(window)
    keys = dict(SHORTCUTS)
    for key, button in (("A", window.inbox.allow_btn), ("D", window.inbox.deny_btn), ("E", window.inbox.edit_btn),
                        ("W", window.inbox.always_btn)):
        assert key in keys and f"[{key}]" in button.text()
    assert "Ctrl+I" in keys and "Shift+Tab" in keys
    assert any("Ctrl+Enter" in k for k in keys)


def _dialog(qtbot, kind):
    found = []

    def visible() -> bool:
        found[:] = [w for w in QApplication.topLevelWidgets() if isinstance(w, kind) and w.isVisible()]
        return bool(found)

    qtbot.waitUntil(visible, timeout=15_000)
    return found[0]


def test_focus_lands_in_the_field_an_action_is_about(qtbot, run, store, window_project):
    from desktop_app.ui.dialogs import ProjectSettingsDialog, SettingsDialog

    _folder, project = window_project
    with AnthropicServer([]) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        run(controller.new_session(project.id))
        assert window.focusWidget() is window.prompt  # after a new session: the prompt

        settings = controller.tasks.spawn(controller.edit_settings())
        dlg = _dialog(qtbot, SettingsDialog)
        assert dlg.focusWidget() is dlg.key  # the API key, not the first tab's first button
        dlg.reject()
        qtbot.waitUntil(settings.done)
        assert window.focusWidget() is window.prompt  # back to the prompt, not "Search sessions…"

        new = controller.tasks.spawn(controller.edit_project(None))
        dlg = _dialog(qtbot, ProjectSettingsDialog)
        qtbot.waitUntil(lambda: dlg.focusWidget() is dlg.folder)  # a new project starts with its folder
        dlg.reject()
        qtbot.waitUntil(new.done)
        run(controller.close())
        run(factory.close())


def test_a_second_ctrl_h_brings_the_history_forward_and_its_search_takes_the_keys(qtbot, run, store, window_project):
    _folder, project = window_project
    with AnthropicServer([]) as server:
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        window.prompt.setFocus()
        _press(qtbot, Qt.Key.Key_H, CTRL)
        history = controller.open_history()  # the one Ctrl+H opened
        qtbot.addWidget(history)
        assert history.isVisible() and history.isWindow() and history.parent() is window  # kept above the window
        assert history.focusWidget() is history.text
        window.activateWindow()  # the main window in front again, as a click on it does
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        _press(qtbot, Qt.Key.Key_H, CTRL)  # again, from the main window: the same history, its search field
        assert controller.open_history() is history and history.focusWidget() is history.text
        assert window.prompt.toPlainText() == ""
        run(controller.close())
        run(factory.close())
