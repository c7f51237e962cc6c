"""Breakpoints from the window, against the loopback Anthropic server: the Breakpoints menu sets one before a tool
(picked in its dialog) and one before the next write; the session stops there, PAUSED with the breakpoint as its
reason and the waiting call above the conversation; Resume lets it go on, Deny stops it; the one-shot is spent."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtWidgets import QInputDialog, QPushButton

from desktop_app.core import ToolCallState
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.window_kit import open_app

pytestmark = pytest.mark.e2e


def button(window, label: str) -> QPushButton:
    return next(b for b in window.approval_banner.findChildren(QPushButton) if b.text() == label and b.isVisible())


def test_a_breakpoint_set_in_the_window_pauses_the_session_and_resume_goes_on(qtbot, run, store, window_project):
    folder, project = window_project
    script = [reply(tool_use("fs_read", {"path": "README.md"}, id="toolu_read")),
              reply(tool_use("fs_write", {"path": "out.txt", "content": "x\n"}, id="toolu_write")),
              reply(text("Done."))]
    with AnthropicServer(script) as server:
        run(store.save_project(project))
        window, controller, factory = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        session = run(controller.new_session(project.id))
        marks = controller.breakpoints
        assert [a.text() for a in marks.menu.actions() if a.text()] == [
            "Break before a tool…", "Break when a call needs approval", "Break before the next write",
            "Clear all breakpoints"]
        asking = asyncio.ensure_future(marks.ask_and_add())  # Breakpoints › Break before a tool…: a dialog of tools
        qtbot.waitUntil(lambda: window.findChild(QInputDialog, "AskBreakpointTool") is not None, timeout=5_000)
        dialog = window.findChild(QInputDialog, "AskBreakpointTool")
        assert "fs_read" in dialog.comboBoxItems()
        dialog.setTextValue("fs_read")
        dialog.accept()
        assert run(asking) == "fs_read"
        marks.write_act.trigger()  # Break before the next write
        assert marks.of(session.id) == ["fs_read", "@write"]
        assert "before fs_read · before the next write" in window.approval_banner.text()

        window.prompt.setPlainText("read then write")
        window.send_btn.click()
        # the read (which nobody would ask about in this mode) stops at its breakpoint
        qtbot.waitUntil(lambda: "PAUSED" in window.approval_banner.text(), timeout=60_000)
        assert "before fs_read" in window.approval_banner.text() and "README.md" in window.approval_banner.text()
        assert marks.paused[session.id].why == "at a breakpoint before fs_read"
        read = marks.waiting_call(session.id)
        assert read.name == "fs_read" and "breakpoint: before fs_read" in read.reason
        button(window, "Resume").click()
        # then the write stops at the one-shot, and Deny stops it
        qtbot.waitUntil(lambda: "(before the next write): <b>fs_write</b>" in window.approval_banner.text(),
                        timeout=30_000)
        assert run(store.get_record(read.call_id)).state is ToolCallState.COMPLETED
        write = marks.waiting_call(session.id)
        with qtbot.waitSignal(controller.turnFinished, timeout=30_000):
            button(window, "Deny").click()
        assert run(store.get_record(write.call_id)).state is ToolCallState.DENIED
        assert not (folder / "out.txt").exists()
        assert "PAUSED" not in window.approval_banner.text()
        assert marks.of(session.id) == ["fs_read"]  # the next write's breakpoint is spent; the tool's stays
        marks.clear()
        assert marks.of(session.id) == [] and "Breakpoints in this session" not in window.approval_banner.text()
        run(controller.close())
        run(factory.close())
