"""The status bar follows the bridge itself: every session's tokens, the current session's retries."""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow

from desktop_app.core import ErrorEvent, EventBus, MemoryStore, TokenUsage
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._statusbar import AgentStatusBar


def test_attach_counts_tokens_per_session_and_shows_retries(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    window = QMainWindow()
    qtbot.addWidget(window)
    status = AgentStatusBar(window)
    status.attach(bridge, lambda: "s1")
    status.show_session("s1")
    bus.publish(TokenUsage(session_id="s1", model="claude-test", input_tokens=1_000, output_tokens=20,
                           cache_read_input_tokens=500, cost_usd=0.25))
    bus.publish(TokenUsage(session_id="s2", input_tokens=7, output_tokens=7, cost_usd=1.0))
    assert status.usage.text() == "1,500 in · 20 out · $0.2500"
    assert status.model.text() == "model: claude-test" and status.has_usage("s2")
    bus.publish(ErrorEvent(session_id="s2", message="overloaded", retrying=True, attempt=2))
    assert status.activity.text() == ""  # another session's retry
    bus.publish(ErrorEvent(session_id="s1", message="overloaded", retrying=True, attempt=2))
    assert status.activity.text() == "overloaded — retrying (attempt 2)"
    bridge.detach()


def test_the_sandbox_says_when_it_runs_on_a_remote_engine_with_a_synced_workspace(qtbot, monkeypatch):
    from desktop_app.sandbox import workspace_where

    monkeypatch.setenv("DOCKER_HOST", "tcp://build-host:2376")
    window = QMainWindow()
    qtbot.addWidget(window)
    status = AgentStatusBar(window)
    where = workspace_where({})
    assert where == "remote engine, synced workspace (tcp://build-host:2376)"
    status.set_sandbox("ready", "agent-desk/minimal:latest", "none", where=where)
    assert "remote engine, synced workspace (tcp://build-host:2376)" in status.sandbox.text()
    assert workspace_where({"workspace": "bind"}) == "" and workspace_where({"sandbox": "local"}) == ""
    monkeypatch.delenv("DOCKER_HOST")
    assert workspace_where({}) == "" and workspace_where({"workspace": "synced"}).startswith("remote engine")
