"""The whole window against the local Anthropic-compatible server: a prompt streams back, a write waits
in the inbox, is approved, completes in the timeline and is found in the history; and an approval left
open survives a restart of the app."""

from __future__ import annotations

import uuid

import pytest
from PySide6.QtCore import Qt

from desktop_app.core import ProjectInfo, SessionInfo
from desktop_app.store import AuditQuery
from tests.conftest import TEST_IMAGE, make_workspace, remove_project
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.window_kit import open_app, row_state

pytestmark = pytest.mark.e2e


def test_prompt_stream_approve_timeline_history(qtbot, run, store, window_project):
    folder, project = window_project
    script = [
        reply(text("I will create the file you asked for."),
              tool_use("fs_write", {"path": "hello.txt", "content": "hello\n"}, id="toolu_write1")),
        reply(text("Created `hello.txt`.")),
    ]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        window.sidebar.tree.setCurrentIndex(window.sidebar.proxy.index(0, 0))

        window.prompt.setPlainText("Please create hello.txt")
        # generous waits: the first runtime of a process is built in ~3 s, far more on a loaded machine
        with qtbot.waitSignal(controller.turnFinished, timeout=60_000) as finished:
            qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: "I will create the file" in window.conversation.toPlainText(),
                            timeout=40_000)
            qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=10_000)
            assert window.inbox.windowTitle() == "Approvals (1)"
            item = window.inbox.model.item(0)
            cid = item.call_id  # the desk's id; the model's "toolu_write1" is only an attribute
            assert cid.startswith("call_") and item.name == "fs_write"
            assert run(store.get_record(cid)).tool_use_id == "toolu_write1"
            assert row_state(window, cid) == "APPROVAL_REQUIRED"
            # the card streamed under the model's id became the record's card: one card, one row
            assert window.conversation.has_card(cid) and not window.conversation.has_card("streaming:toolu_write1")
            assert window.conversation.toPlainText().count("fs_write") == 1
            assert row_state(window, "toolu_write1") is None
            qtbot.waitUntil(lambda: "+hello" in window.inbox.card.toPlainText(), timeout=10_000)  # diff
            assert not (folder / "hello.txt").exists()
            window.inbox.list.setCurrentIndex(window.inbox.model.index(0))
            qtbot.mouseClick(window.inbox.allow_btn, Qt.MouseButton.LeftButton)
        assert finished.args[1].reason == "end_turn"
        assert (folder / "hello.txt").read_text() == "hello\n"
        assert window.inbox.model.rowCount() == 0
        qtbot.waitUntil(lambda: row_state(window, cid) == "COMPLETED", timeout=15_000)
        qtbot.waitUntil(lambda: "Created hello.txt." in window.conversation.toPlainText(), timeout=15_000)
        # the request carried the tool result back to the model
        assert any(b.get("type") == "tool_result" for m in server.requests[-1].body["messages"]
                   for b in (m["content"] if isinstance(m["content"], list) else []))

        # the card in the conversation selects the timeline row
        window.conversation.callActivated.emit(cid)
        assert window.timeline.current_call() == cid
        qtbot.waitUntil(lambda: "Audit trail" in window.timeline.details.toPlainText(), timeout=15_000)
        assert "user" in window.timeline.details.toPlainText()  # who approved it

        history = controller.open_history()
        qtbot.addWidget(history)
        history.tool.setCurrentText("fs_write")
        run(history.refresh())
        assert history.model.total == 1 and history.model.row(0).id == cid
        run(controller.close())
        run(factory.close())


def test_an_open_approval_survives_a_restart(qtbot, run, store, window_project):
    folder, project = window_project
    script = [
        reply(tool_use("bash_run", {"command": "echo restarted > out.txt"}, id="toolu_bash1")),
        reply(text("Done after the restart.")),
    ]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        run(store.save_session(SessionInfo("ses_rt", project.id, "restart me")))
        # first run of the app: the call reaches the inbox, then the app goes away without an answer
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        assert controller.current_session == "ses_rt"
        window.prompt.setPlainText("write out.txt")
        qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=10_000)
        run(store.flush())
        controller.bridge.detach()
        window.close()
        # like a killed app: the old turn never gets its answer; its model client and sandbox go away
        run(factory.close())
        [waiting] = run(store.list_records(AuditQuery(tool_use_id="toolu_bash1")))
        assert waiting.state.value == "APPROVAL_REQUIRED"
        cid = waiting.id

        # second run: same store, new window, new executor
        window2, controller2, factory2 = open_app(qtbot, run, store, server, project)
        run(controller2.start(check_docker=False))
        assert [i.call_id for i in window2.inbox.model.items()] == [cid]
        assert window2.inbox.model.item(0).session_title == "restart me"
        assert row_state(window2, cid) == "APPROVAL_REQUIRED"
        with qtbot.waitSignal(window2.inbox.model.rowsRemoved, timeout=15_000):
            window2.inbox.allow_selected()
        # the shell creates the file, then writes it: wait for its content, not for the file
        out = folder / "out.txt"
        qtbot.waitUntil(lambda: out.exists() and out.read_text().strip() == "restarted", timeout=15_000)
        qtbot.waitUntil(lambda: row_state(window2, cid) == "COMPLETED", timeout=15_000)
        qtbot.waitUntil(lambda: "Done after the restart." in window2.conversation.toPlainText(), timeout=15_000)
        run(controller2.close())
        run(factory2.close())


@pytest.mark.docker
def test_a_call_approved_in_the_window_runs_in_docker_and_shows_where(qtbot, run, store, tmp_path, monkeypatch,
                                                                        docker_client):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = make_workspace(tmp_path / "ws")
    project = ProjectInfo(f"prj-ui-{uuid.uuid4().hex[:8]}", "docker-demo", str(folder), image=TEST_IMAGE,
                          permission_mode="ask", settings={})
    script = [reply(tool_use("bash_run", {"command": "echo hello from the container"}, id="toolu_dock1")),
              reply(text("It ran in the container."))]
    try:
        with AnthropicServer(script) as server:
            run(store.save_project(project))
            window, controller, factory = open_app(qtbot, run, store, server, project)
            run(controller.start(check_docker=False))
            run(controller.new_session(project.id))
            window.prompt.setPlainText("say hello")
            with qtbot.waitSignal(controller.turnFinished, timeout=60_000):
                qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
                qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=60_000)
                cid = window.inbox.model.item(0).call_id
                window.inbox.allow_selected()
            qtbot.waitUntil(lambda: row_state(window, cid) == "COMPLETED", timeout=10_000)
            assert "hello from the container" in window.timeline_model.output(cid)
            qtbot.waitUntil(lambda: bool(getattr(window.timeline_model.get(cid).record, "sandbox", None)),
                            timeout=10_000)
            sandbox = window.timeline_model.get(cid).record.sandbox
            assert sandbox["kind"] == "docker" and sandbox["image_digest"].startswith("sha256:")
            assert window.timeline.select_call(cid)
            details = window.timeline.details.toPlainText()
            assert "Where it ran" in details and sandbox["container_id"][:12] in details
            assert window.timeline_model.get(cid).exit_code == 0
            run(controller.close())
            run(factory.close())
    finally:
        remove_project(docker_client, project.id)
