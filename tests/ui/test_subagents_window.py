"""A sub-agent in the whole window against the local Anthropic-compatible server: its call waits in the inbox
marked with its name, is denied there with a note, the note reaches the child and the child's answer the
parent; its calls sit under the task_run call in the timeline, and its session stays out of the sidebar."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from desktop_app.core import ToolCallState
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.window_kit import open_app, row_state

pytestmark = pytest.mark.e2e


def test_a_sub_agents_call_denied_from_the_inbox(qtbot, run, store, window_project, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(tmp_path / "cfg"))
    folder, project = window_project
    script = [
        reply(tool_use("task_run", {"task": "Create built.txt", "template": "coding", "name": "builder"})),
        reply(tool_use("bash_run", {"command": "touch built.txt"})),
        lambda req: reply(text(f"Could not: {req.last_tool_result_text()}")),
        lambda req: reply(text(f"The builder said: {req.last_tool_result_text()}")),
    ]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        window.sidebar.tree.setCurrentIndex(window.sidebar.proxy.index(0, 0))
        window.prompt.setPlainText("Build it")
        with qtbot.waitSignal(controller.turnFinished, timeout=30_000) as finished:
            qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=15_000)
            item = window.inbox.model.item(0)
            assert item.title == "⤷ coding 1 · Run command" and item.session_title == "Build it"
            assert "sub-agent coding 1 (template coding), task: Create built.txt" in window.inbox.card.toPlainText()
            task_row = window.timeline_model.row_of(item.meta["parent_call_id"])
            assert task_row >= 0 and window.timeline_model.row_at(task_row + 1).call_id == item.call_id
            assert window.timeline_model.index(task_row + 1, 1).data() == "⤷ Run command"
            window.inbox.list.setCurrentIndex(window.inbox.model.index(0))
            window.inbox.note.setText("build nothing today")
            qtbot.mouseClick(window.inbox.deny_btn, Qt.MouseButton.LeftButton)
        assert finished.args[1].reason == "end_turn"
        assert not (folder / "built.txt").exists()
        assert "build nothing today" in server.requests[2].last_tool_result_text()
        assert "Could not:" in server.requests[3].last_tool_result_text()
        qtbot.waitUntil(lambda: "The builder said" in window.conversation.toPlainText(), timeout=15_000)
        assert list(controller.agents) == [controller.current_session]  # no second agent for the child
        child = run(store.get_record(item.call_id))
        assert child.state is ToolCallState.DENIED and row_state(window, item.call_id) == "DENIED"
        run(controller.reload_projects())  # the child's session is not a session of the sidebar
        assert window.sidebar.proxy.rowCount(window.sidebar.proxy.index(0, 0)) == 1
        # reopened from history, the child's calls are nested again
        current = controller.current_session
        run(controller.select_session(run(controller.new_session(project.id)).id))
        run(controller.select_session(current))
        qtbot.waitUntil(lambda: window.timeline_model.row_of(item.call_id) >= 0, timeout=5_000)
        assert window.timeline_model.get(item.call_id).depth == 1
        run(controller.close())
        run(factory.close())
