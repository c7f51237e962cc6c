"""Layout that gives space back, and the session's mode in view: at 1024x700 the conversation keeps half the width
and the status bar shows every part whole; an empty inbox is a line and the timeline's details get their height
back; the mode is switched per session (Shift+Tab in the prompt, plan included), judged so by the session's policy,
and follows a plan approved into another mode. The window rendered mid-turn at 1024x700 and 1920x1080 (a failed
command, a refusal, a question, a plan, a sub-agent) is saved as PNGs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from desktop_app.core import PermissionMode
from desktop_app.runtime import MODE_KEY
from desktop_app.ui import MainWindow
from desktop_app.ui.dialogs import MODE_HELP
from desktop_app.ui.inbox import PendingApproval
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import isolated_environ
from tests.ui.window_kit import open_app

ROOT = Path(__file__).resolve().parents[2]


def _window(qtbot, width: int, height: int) -> MainWindow:
    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_at_1024x700_the_conversation_keeps_half_and_the_status_bar_is_whole(qtbot, qloop):
    window = _window(qtbot, 1024, 700)
    s = window.status
    s.set_model("claude-sonnet-4-6")
    s.set_sandbox("running", "agent-desk/python:latest", "none")
    s.usage.setText("30,432 in · 1,204 out · $0.0772")
    qtbot.waitUntil(lambda: window.centralWidget().width() >= window.width() // 2)
    bar = window.statusBar()
    QApplication.processEvents()
    for part in (s.model, s.key, s.sandbox, s.usage):
        right = part.mapTo(bar, part.rect().topRight()).x()
        assert part.isVisible() and right <= bar.width(), part.text()
        assert part.width() >= part.sizeHint().width(), part.text()  # not cut
    # a long check with its button: the sandbox's words give way (elided, whole in the tooltip), nothing else does
    text = "The image ghcr.io/example-org/shop-backend-devcontainer:2026-11-01 is not built yet on this engine"
    s.show_check("amber", text, "Build it from .devcontainer/Dockerfile", "build", lambda: None)
    QApplication.processEvents()
    for part in (s.model, s.key, s.sandbox_action, s.usage):
        right = part.mapTo(bar, part.rect().topRight()).x()
        assert part.isVisible() and right <= bar.width() and part.width() >= part.sizeHint().width(), part
    assert s.sandbox.width() < s.sandbox.sizeHint().width() and text in s.sandbox.toolTip()
    assert text in s.sandbox.text()
    assert not s.sandbox.grab().isNull()  # the elided paint runs


def test_an_empty_inbox_is_a_line_and_the_details_get_their_height_back(qtbot, qloop):
    window = _window(qtbot, 1024, 700)
    details = window.timeline.details
    qtbot.waitUntil(lambda: window.inbox.height() <= 110)  # the title and one line
    assert window.inbox.empty.isVisible()
    before = details.height()
    window.inbox.add(PendingApproval("c1", "s", "bash_run", {"command": "make"}, risk="medium", reason="asks"))
    qtbot.waitUntil(lambda: window.inbox.height() >= 0.5 * window.height())
    assert details.height() < before
    window.inbox.remove("c1")
    qtbot.waitUntil(lambda: window.inbox.height() <= 110)
    assert details.height() >= before - 4


def test_every_mode_has_one_sentence_and_auto_says_what_still_asks():
    for mode in PermissionMode:
        help_text = MODE_HELP[mode]
        assert help_text and "\n" not in help_text and help_text.count(";") <= 1, mode
    assert "high-risk" in MODE_HELP[PermissionMode.AUTO] and "ask" in MODE_HELP[PermissionMode.AUTO]
    assert "plan" in MODE_HELP[PermissionMode.PLAN]


def test_the_mode_is_switched_per_session_and_follows_an_approved_plan(qtbot, run, store, window_project):
    folder, project = window_project
    plan = "## Plan\n\n1. write notes.txt"
    script = [reply(tool_use("fs_write", {"path": "notes.txt", "content": "x\n"}, id="toolu_w")),
              reply(tool_use("exit_plan_mode", {"plan": plan}, id="toolu_p")),
              reply(text("Planned."))]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        session = run(controller.new_session(project.id))
        agent = run(controller.agent_for(session.id))
        picker = window.mode_picker
        assert picker.mode() == "ask" == controller.desk.session_mode(agent)
        window.prompt.setFocus()
        for _ in range(len(PermissionMode)):  # Shift+Tab in the prompt: the next mode, as in Claude Code
            if picker.mode() == "plan":
                break
            qtbot.keyClick(window.prompt, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
            assert controller.desk.session_mode(agent) == picker.mode() and window.prompt.hasFocus()
        assert picker.mode() == "plan" and "plan" in picker.help.text()
        assert project.permission_mode == "ask"  # the project keeps its own
        window.prompt.setPlainText("Plan a notes file")
        with qtbot.waitSignal(controller.turnFinished, timeout=60_000):
            qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: window.inbox.questions.current is not None, timeout=30_000)
            assert not (folder / "notes.txt").exists()  # plan mode denied the write
            window.inbox.questions.modes.setCurrentIndex(window.inbox.questions.modes.findData("accept-edits"))
            window.inbox.questions.approve_btn.click()
        qtbot.waitUntil(lambda: picker.mode() == "accept-edits")
        assert controller.desk.session_mode(agent) == "accept-edits"
        conv = window.conversation
        qtbot.waitUntil(lambda: "Plan approved → accept-edits" in conv.toPlainText(), timeout=15_000)
        assert "denied" in conv.toPlainText()
        qtbot.waitUntil(lambda: run(store.get_session(session.id)).meta.get(MODE_KEY) == "accept-edits")
        run(controller.close())
        run(factory.close())
        # a restart: the session reopens in the mode it was in, and its notices say how it got there
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        run(controller.select_session(session.id))
        assert window.mode_picker.mode() == "accept-edits"
        agent = run(controller.agent_for(session.id))
        assert controller.desk.session_mode(agent) == "accept-edits" and project.permission_mode == "ask"
        said = ("Mode: plan (you chose it)", "Mode: accept-edits (the plan was approved)")  # the session's notices
        qtbot.waitUntil(lambda: all(s in window.conversation.toPlainText() for s in said), timeout=15_000)
        run(controller.close())
        run(factory.close())


@pytest.mark.parametrize("size", ["1024x700", "1920x1080"])
def test_the_window_mid_turn_is_rendered_as_a_png(tmp_path, size):
    env = isolated_environ(tmp_path, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    png = tmp_path / f"main-{size}.png"
    out = subprocess.run([sys.executable, "-m", "desktop_app.app", "--sample-data", "--screenshot", str(png),
                          "--view", "main", "--size", size], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and f"screenshot saved: {png}" in out.stdout
    image = QImage(str(png))
    assert f"{image.width()}x{image.height()}" == size
    print(f"screenshot artifact: {png}")


def test_mid_turn_the_window_shows_each_kind_of_call_as_what_it_is(qtbot, run, store, tmp_path, desk_env):
    """The sample turn in this process, at both sizes, saved as PNGs: a failed command is "exit 1" in red
    (card, timeline and details), the refusal, the answered question, the approved plan and the sub-agent read
    as what they are, and the waiting calls are in the inbox."""
    from desktop_app.ui.demo import _main_view, fill_sample

    with AnthropicServer([]) as server:
        window, controller, desk = open_app(qtbot, run, store, server, None)
        run(fill_sample(store, controller))
        run(_main_view(window, True))
        conv = window.conversation
        qtbot.waitUntil(lambda: "Sub-agent explore 1" in conv.toPlainText(), timeout=15_000)
        text = conv.toPlainText()
        for said in ("✗ exit 1", "No module named pytest.", "denied", "Denied by rule bash_run(curl *).",
                     "you answered “Yes”", "Plan approved → accept-edits", "Sub-agent explore 1"):
            assert said in text, said
        model = window.timeline_model
        failed = model.row_of("call_s3")
        assert model.index(failed, 0).data() == "exit 1"
        assert "exit 1" in window.timeline.details.toPlainText().splitlines()[0]
        assert window.inbox.model.rowCount() >= 2 and window.mode_picker.mode() == "accept-edits"
        for w, h in ((1024, 700), (1920, 1080)):
            window.resize(w, h)
            qtbot.waitUntil(lambda w=w: window.centralWidget().width() >= w // 2)
            path = tmp_path / f"mid-turn-{w}x{h}.png"
            assert window.grab().save(str(path)) and QImage(str(path)).width() == w
            print(f"screenshot artifact: {path}")
        run(controller.close())
        run(desk.close())
