"""Quitting: with work in flight the window asks (wait, stop the running calls, or quit anyway) and does
what the person chose; the app's own process quits in order, exits 0 and prints nothing."""

from __future__ import annotations

import logging
import signal

import pytest

from desktop_app.core import Outcome, ProjectInfo, ToolCallState
from desktop_app.store import AuditQuery
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.helpers import shown_words
from tests.ui.lifecycle_kit import answer, app_env, launch, open_app, quit_dialog, wait_until, window_answers

pytestmark = pytest.mark.e2e


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    folder = tmp_path / "project"
    folder.mkdir()
    # auto mode: the command runs without asking, so it is running (not waiting) when the person quits
    return ProjectInfo("prj_quit", "quitter", str(folder), permission_mode="auto", settings={"sandbox": "local"})


def _running_call(qtbot, run, store, server, project):
    run(store.save_project(project))
    window, controller, factory = open_app(qtbot, run, store, server)
    run(controller.start(check_docker=False))
    window.prompt.setPlainText("wait a while")
    window._send_clicked()
    qtbot.waitUntil(lambda: bool(controller.running_calls.running), timeout=20_000)
    [cid] = controller.running_calls.running
    return window, controller, factory, cid


def test_quit_with_a_call_running_asks_and_wait_keeps_everything(qtbot, run, store, project):
    script = [reply(tool_use("bash_run", {"command": "sleep 30"}, id="toolu_sleep")), reply(text("slept"))]
    with AnthropicServer(script) as server:
        window, controller, factory, cid = _running_call(qtbot, run, store, server, project)
        window.quit_act.trigger()  # Ctrl+Q
        qtbot.waitUntil(lambda: quit_dialog() is not None, timeout=5_000)
        box = quit_dialog()
        assert "running: bash_run sleep 30" in box.informativeText()
        assert window.isVisible()
        answer(box, "Wait")
        qtbot.waitUntil(lambda: quit_dialog() is None, timeout=5_000)
        assert window.isVisible() and controller.running_calls.running == {cid: "bash_run sleep 30"}
        assert run(store.get_record(cid)).state is ToolCallState.EXECUTING

        # closing from the title bar asks the same question; "Stop running calls and quit" ends the call,
        # recorded, and closes the window
        with qtbot.waitSignal(window.closed, timeout=20_000):
            window.close()
            qtbot.waitUntil(lambda: quit_dialog() is not None, timeout=5_000)
            answer(quit_dialog(), "Stop running calls and quit")
        assert not window.isVisible()
        rec = run(store.get_record(cid))
        # stopped by the person: interrupted, the word a crash's sealed call gets too, wherever it is shown
        assert (rec.state, rec.outcome) == (ToolCallState.FAILED, Outcome.INTERRUPTED)
        assert rec.error == "interrupted: you stopped it while it ran"
        tl = window.timeline_model
        qtbot.waitUntil(lambda: tl.get(cid).outcome == "interrupted", timeout=5_000)
        assert tl.data(tl.index(tl.row_of(cid), 0)) == "interrupted"
        assert shown_words(rec) == {"interrupted"}
        run(controller.close())
        run(factory.close())


def test_quit_anyway_cuts_the_call_off_and_leaves_it_for_the_next_start(qtbot, run, store, project):
    script = [reply(tool_use("bash_run", {"command": "sleep 30"}, id="toolu_sleep")), reply(text("slept"))]
    with AnthropicServer(script) as server:
        window, controller, factory, cid = _running_call(qtbot, run, store, server, project)
        with qtbot.waitSignal(window.closed, timeout=20_000):
            window.quit_act.trigger()
            qtbot.waitUntil(lambda: quit_dialog() is not None, timeout=5_000)
            answer(quit_dialog(), "Quit anyway")
        run(controller.close())  # what app.py does next: the turn is abandoned where it stands
        run(factory.close())
        run(store.flush())
        # cut off where it stood, as a killed app leaves it: nothing more recorded (the next start, another
        # process, seals it as interrupted), and the model was not asked again
        assert run(store.get_record(cid)).state is ToolCallState.EXECUTING
        assert len(server.requests) == 1


def test_quit_with_nothing_in_flight_closes_at_once(qtbot, run, store, project, caplog):
    with AnthropicServer([reply(text("hello"))]) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        run(controller.send("hi"))
        [agent] = controller.agents.values()  # the session's agent is open: close() has something to close
        with qtbot.waitSignal(window.closed, timeout=5_000):
            window.quit_act.trigger()
        assert quit_dialog() is None and not window.isVisible()
        caplog.set_level(logging.WARNING)
        run(controller.close())
        run(factory.close())
    # seen on every quit: "ERROR: closing a session failed" (a TypeError: close() was awaited, and it is not a
    # coroutine). Now the session closes and the quit logs nothing.
    assert agent.state.value == "STOPPED" and controller.agents == {}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_approvals_waiting_count_as_work_in_flight(qtbot, run, store, project):
    project.permission_mode = "ask"
    script = [reply(tool_use("fs_write", {"path": "a.txt", "content": "a\n"}, id="toolu_w")), reply(text("ok"))]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server)
        run(controller.start(check_docker=False))
        window.prompt.setPlainText("write a.txt")
        window._send_clicked()
        qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 1, timeout=20_000)
        window.quit_act.trigger()
        qtbot.waitUntil(lambda: quit_dialog() is not None, timeout=5_000)
        assert "1 approval waiting for you" in quit_dialog().informativeText()
        answer(quit_dialog(), "Wait")
        qtbot.waitUntil(lambda: quit_dialog() is None, timeout=5_000)
        assert window.isVisible() and window.inbox.model.rowCount() == 1
        run(controller.close())
        run(factory.close())
        [waiting] = run(store.list_records(AuditQuery(tool_use_id="toolu_w")))
        assert waiting.state.value == "APPROVAL_REQUIRED"  # offered again when the session reopens


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_app_process_quits_in_order_exits_0_and_prints_nothing(tmp_path, sig):
    folder = tmp_path / "project"
    folder.mkdir()
    env = app_env(tmp_path)
    proc = launch(["-m", "desktop_app.app", str(folder)], env)
    try:
        wait_until(lambda: window_answers(env), 90, proc, "the window to answer")
    except BaseException:
        proc.kill()
        raise
    proc.send_signal(sig)
    code, vout, verr = _quit_silently_then_verify(proc, env, 60)
    # the store was closed, not cut short: it opens, and its chain (no call was made: only the rows the window
    # stored, its project, session and events, bound into it) verifies
    assert code == 0 and "audit chain OK" in vout and "BROKEN" not in verr, vout + verr


def _quit_silently_then_verify(proc, env, timeout_s: float) -> tuple[int, str, str]:
    """The app process ends with exit 0 and says nothing; then `audit verify` on its store: (exit, out, err)."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    # this machine has no keyring: that start-up warning is the one line allowed; the quit itself says nothing
    # and the window says it creates its database (a mistyped --db shows)
    said = [ln for ln in err.splitlines()
            if "no keyring backend is available" not in ln and "creating the audit database" not in ln]
    assert said == [] and out == ""
    check = launch(["-m", "desktop_app.cli", "audit", "verify"], env)
    vout, verr = check.communicate(timeout=60)
    return check.returncode, vout, verr


# The app run as `python -m desktop_app.app`, with one step of its start-up made to send the process a signal
# first: the signal comes at that moment, every time (no race with the test).
_SIGNAL_AT = """
import os, signal, sys
from desktop_app import app
from desktop_app.ui import AppController
sig, where = int(sys.argv[1]), sys.argv[2]
owner, name = (app, "_open_store") if where == "store" else (AppController, "start")
real = getattr(owner, name)

async def signalled(*a, **kw):
    os.kill(os.getpid(), sig)
    return await real(*a, **kw)

setattr(owner, name, signalled)
sys.exit(app.main(sys.argv[3:]))
"""


@pytest.mark.parametrize("where", ["store", "start"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_start_up_quits_in_order_too(tmp_path, sig, where):
    """Ctrl+C or a logout while the window starts (its store opening, its controller starting): exit 0, no
    traceback, and the store opens and verifies after (before, the default handler killed it or raised
    KeyboardInterrupt wherever the loop was)."""
    folder = tmp_path / "project"
    folder.mkdir()
    env = app_env(tmp_path)
    proc = launch(["-c", _SIGNAL_AT, str(int(sig)), where, str(folder)], env)
    code, vout, verr = _quit_silently_then_verify(proc, env, 90)
    if where == "start":  # the window's rows are stored and bound into the chain
        assert code == 0 and "audit chain OK" in vout, vout + verr
    else:  # nothing was stored: nothing to verify, nothing broken
        assert code == 1 and "nothing to verify" in vout + verr and "BROKEN" not in vout + verr, vout + verr
