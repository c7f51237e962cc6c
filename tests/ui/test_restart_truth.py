"""The truth after a restart: the app's process is killed for real (SIGKILL) with a call running; the next
window seals that call at once, shows it interrupted with a notice that says what was running, and shows
the title, the messages, the durations, the errors and the token totals exactly as they were."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import textwrap
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from desktop_app.core import EventBus, ProjectInfo, SessionInfo, ToolCallRecord, ToolCallState
from desktop_app.runtime import OPEN_IN, process_alive, seal_abandoned, this_process
from desktop_app.store import SqlStore
from tests.fakes.anthropic_server import AnthropicServer, HttpError, reply, text, tool_use
from tests.ui.helpers import shown_words
from tests.ui.lifecycle_kit import app_env, launch, open_app, wait_until

pytestmark = pytest.mark.e2e

# The real app's entry (desktop_app.app.main) with a person typing the prompt once the window shows a session.
DRIVER = textwrap.dedent("""
    import sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from desktop_app import app as desk

    qt = QApplication(["agent-desk"])

    def type_prompt():
        w = next((w for w in qt.topLevelWidgets() if w.objectName() == "MainWindow" and w.isVisible()), None)
        if w is None or not w.session_label.text():
            QTimer.singleShot(100, type_prompt)
            return
        w.prompt.setPlainText(sys.argv[2])
        w._send_clicked()

    QTimer.singleShot(100, type_prompt)
    sys.exit(desk.main([sys.argv[1]]))
""")


def _kill_app_with_a_call_running(tmp_path: Path, folder: Path, server: AnthropicServer,
                                  ready: Callable[[], bool] | None = None) -> None:
    env = app_env(tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY=server.api_key)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    proc = launch([str(driver), str(folder), "please wait for the build"], env)
    left: list[psutil.Process] = []
    try:
        wait_until(ready or (folder / "started").exists, 120, proc, "the command to start")
        left = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)  # the app dies as in a crash: nothing is closed, nothing recorded
        proc.wait(timeout=30)
    finally:
        for p in [*left, psutil.Process(proc.pid)] if proc.poll() is None else left:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()  # the command it left behind
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_a_killed_app_s_running_call_is_sealed_at_once_on_the_next_start(qtbot, run, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "project"
    folder.mkdir()
    db = tmp_path / "data" / "agent-desk.db"  # the default database of the app in app_env
    db.parent.mkdir()
    project = ProjectInfo("prj_kill", "killed", str(folder.resolve()), permission_mode="auto",
                          settings={"sandbox": "local"})
    store = run(SqlStore.open(db))
    run(store.save_project(project))
    run(store.close())
    script = [reply(text("Building."), tool_use("bash_run", {"command": "touch started && sleep 120"}, id="toolu_b"))]
    with AnthropicServer(script) as server:
        _kill_app_with_a_call_running(tmp_path, folder, server)

        store = run(SqlStore.open(db))
        [session] = run(store.list_sessions())
        [rec] = run(store.session_records(session.id))
        assert rec.state is ToolCallState.EXECUTING  # what the dead process left
        assert process_alive(session.meta[OPEN_IN]) is False
        newer = SessionInfo("ses_newer", project.id, "a newer session", updated_at=session.updated_at + 60)
        run(store.save_session(newer))  # the crash's session is not the newest: it is still the one opened

        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        # sealed at once, before anyone sends anything, and the session it was in is opened and marked
        assert controller.current_session == session.id
        assert run(store.get_record(rec.id)).state is ToolCallState.SEALED
        row = window.timeline_model.get(rec.id)
        assert row.state is ToolCallState.SEALED
        # the same word as a call the person stopped, in the timeline, the details, the history and the export
        assert shown_words(run(store.get_record(rec.id))) == {"interrupted"}
        shown = window.conversation.toPlainText()
        assert "You\nplease wait for the build" in shown  # the message, stored before it was sent
        assert "bash_run  touch started && sleep 120  interrupted" in shown
        assert ("The app stopped while 1 call was running: bash_run touch started && sleep 120. It was "
                "interrupted") in shown
        # the title came from the first prompt; the header and the sidebar say the same
        assert session.title == "please wait for the build"
        assert window.session_label.text() == "killed › please wait for the build"
        qtbot.waitUntil(lambda: window.projects_model.session_index(session.id).data()
                        == "interrupted · please wait for the build")
        assert window.projects_model.session_index(newer.id).data() == "a newer session"
        assert "in ·" in window.status.usage.text() and "$0.0" in window.status.usage.text()
        usage = window.status.usage.text()
        run(controller.close())
        run(factory.close())

        # a second start: the same picture, the notice once, nothing sealed twice
        window2, controller2, factory2 = open_app(qtbot, run, store, server)
        run(controller2.start(check_docker=False))
        assert controller2.current_session == newer.id  # nothing sealed now: the newest session, as always
        run(controller2.select_session(session.id))
        again = window2.conversation.toPlainText()
        assert again == shown
        assert again.count("The app stopped while") == 1
        assert window2.status.usage.text() == usage
        run(controller2.close())
        run(factory2.close())
        run(store.close())


def _stored_output(db: Path, text: str) -> bool:
    """Whether the killed app's store holds a streamed output chunk with `text` (read from another process)."""
    if not db.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as conn:
        try:
            rows = conn.execute("SELECT payload FROM events WHERE type = 'tool:update'").fetchall()
        except sqlite3.OperationalError:  # not created yet, or busy: asked again
            return False
    return any(text in str(r[0]) for r in rows)


def test_a_crash_keeps_the_streamed_output_and_the_next_turn_s_totals_as_shown(qtbot, run, tmp_path, monkeypatch):
    """Seen: after a restart a turn's token totals changed (the usage of the turn the crash cut short was
    added to the next turn's), and the output a call streamed before the crash was gone from its details."""
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "project"
    folder.mkdir()
    db = tmp_path / "data" / "agent-desk.db"
    db.parent.mkdir()
    project = ProjectInfo("prj_out", "output", str(folder.resolve()), permission_mode="auto",
                          settings={"sandbox": "local"})
    store = run(SqlStore.open(db))
    run(store.save_project(project))
    run(store.close())
    command = "echo compiled-part-one; touch started; sleep 120"
    script = [reply(text("Building."), tool_use("bash_run", {"command": command}, id="toolu_b")),
              reply(text("Carrying on."))]
    with AnthropicServer(script) as server:
        _kill_app_with_a_call_running(tmp_path, folder, server,
                                      lambda: (folder / "started").exists() and _stored_output(db, "compiled-part-one"))
        store = run(SqlStore.open(db))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        [rec] = run(store.session_records(controller.current_session))
        assert rec.state is ToolCallState.SEALED
        assert "compiled-part-one" in window.timeline_model.output(rec.id)
        assert window.timeline.select_call(rec.id)
        assert "compiled-part-one" in window.timeline.details.toPlainText()
        run(controller.send("go on"), timeout=60_000)
        live = window.conversation.toPlainText()
        assert live.count("This turn:") == 1  # the line of the turn that ended; the killed one never had one
        run(controller.close())
        run(factory.close())

        window2, controller2, factory2 = open_app(qtbot, run, store, server)
        run(controller2.start(check_docker=False))
        qtbot.waitUntil(lambda: window2.conversation.toPlainText() == live)  # the cards repaint on the next frame
        assert "compiled-part-one" in window2.timeline_model.output(rec.id)
        run(controller2.close())
        run(factory2.close())
        run(store.close())


def test_notices_errors_durations_and_costs_come_back_exactly(qtbot, run, store, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "p"
    folder.mkdir()
    project = ProjectInfo("prj_1", "demo", str(folder), permission_mode="auto", settings={"sandbox": "local"})
    script = [reply(text("ok"), tool_use("bash_run", {"command": "sleep 0.3"}, id="t1")), reply(text("done")),
              HttpError(400, "invalid_request_error", "bad thing")]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        run(controller.send("first prompt here"), timeout=60_000)
        run(controller.send("second"), timeout=60_000)
        live = window.conversation.toPlainText()
        # one error line (not the ErrorEvent's and the Done's), with its Retry
        assert live.count("bad thing") == 1 and window.conversation.has_retry()
        assert " ms" in live or " s" in live  # the card's duration
        usage = window.status.usage.text()
        run(controller.close())
        run(factory.close())

        window2, controller2, factory2 = open_app(qtbot, run, store, server)
        run(controller2.start(check_docker=False))
        restored = window2.conversation.toPlainText()
        assert restored == live
        assert window2.conversation.has_retry()  # the last error line offers Retry again
        assert window2.status.usage.text() == usage
        run(controller2.close())
        run(factory2.close())


def test_a_first_message_that_never_reached_the_model_is_kept_with_a_retry(qtbot, run, store, tmp_path,
                                                                            monkeypatch):
    """The sandbox cannot start (an image that does not exist): the message is stored anyway, one error line
    offers Retry, and after a restart the message is still there."""
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "p"
    folder.mkdir()
    project = ProjectInfo("prj_noimg", "noimage", str(folder), image="agent-desk/not-built-here:0",
                          permission_mode="ask", settings={})
    with AnthropicServer([reply(text("never"))]) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        run(controller.new_session(project.id))
        run(controller.send("my first message"), timeout=120_000)
        assert window.conversation.toPlainText().count("⚠") == 1 and window.conversation.has_retry()
        assert server.requests == []
        sid = controller.current_session
        [msg] = run(store.messages(sid))
        assert msg.role == "user" and msg.content == [{"type": "text", "text": "my first message"}]
        run(controller.close())
        run(factory.close())

        window2, controller2, factory2 = open_app(qtbot, run, store, server)
        run(controller2.start(check_docker=False))
        assert "You\nmy first message" in window2.conversation.toPlainText()
        assert window2.session_label.text() == "noimage › my first message"
        run(controller2.close())
        run(factory2.close())


def test_a_session_another_live_process_has_open_is_left_alone(run, store):
    """The CLI (or another desk on a shared database) runs this session now: its call is not sealed."""
    run(store.save_project(ProjectInfo("prj_live", "live", "/tmp")))
    live = SessionInfo("ses_live", "prj_live", meta={OPEN_IN: this_process()})
    gone = SessionInfo("ses_gone", "prj_live", meta={OPEN_IN: {**this_process(), "started": 1.0}})  # pid reused
    other_host = SessionInfo("ses_far", "prj_live", meta={OPEN_IN: {**this_process(), "host": "elsewhere"}})
    never = SessionInfo("ses_old", "prj_live")  # from before the mark
    for s in (live, gone, other_host, never):
        run(store.save_session(s))
        rec = ToolCallRecord(name="bash_run", input={"command": "make"}, id=f"call_{s.id}", session_id=s.id,
                             project_id="prj_live")
        run(store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor")))
    bus = run(EventBus.open(store))
    sealed = run(seal_abandoned(store, bus))
    assert sorted(sealed) == ["ses_gone", "ses_old"]
    states = {sid: run(store.session_records(sid))[0].state for sid in ("ses_live", "ses_gone", "ses_far", "ses_old")}
    assert states == {"ses_live": ToolCallState.EXECUTING, "ses_gone": ToolCallState.SEALED,
                      "ses_far": ToolCallState.EXECUTING, "ses_old": ToolCallState.SEALED}
    assert run(seal_abandoned(store, bus)) == {}  # once
