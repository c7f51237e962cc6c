"""The cost of each turn and of the session in the window, from real turns against the fake Anthropic server:
the conversation ends each turn with its tokens and cost, and the status bar adds up the session's."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtWidgets import QMainWindow

from desktop_app.config import Settings
from desktop_app.core import EventBus, ProjectInfo, TokenUsage
from desktop_app.runtime import ProjectRuntimes
from desktop_app.sandbox import LocalSandbox
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._conversation import ConversationView, turn_cost_text
from desktop_app.ui._statusbar import AgentStatusBar
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use

USAGE = {"input_tokens": 120_000, "output_tokens": 4_000}


def test_each_turn_ends_with_its_cost_and_the_status_bar_sums_the_session(qtbot, run, store, tmp_path: Path,
                                                                           desk_env: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    replies = [reply(tool_use("fs_glob", {"pattern": "*"}), usage=USAGE), reply(text("first"), usage=USAGE),
               reply(text("second"), usage=USAGE)]
    with AnthropicServer(replies) as server:
        settings = Settings(base_url=server.url, api_key=server.api_key)
        bus = run(EventBus.open(store))
        bridge = EventBridge(bus)
        seen: list[TokenUsage] = []
        bridge.tokenUsage.connect(seen.append)
        window = QMainWindow()
        qtbot.addWidget(window)
        view = ConversationView()
        qtbot.addWidget(view)
        status = AgentStatusBar(window)
        project = ProjectInfo(id="prj_c", name="c", path=str(folder), permission_mode="auto")
        run(store.save_project(project))
        runtimes = ProjectRuntimes(settings=settings, store=store, bus=bus,
                                   sandbox_factory=lambda p: LocalSandbox(p.path))
        try:
            session = run(runtimes(project, None))
            sid = session.session.id
            view.attach(bridge, lambda: sid)
            status.attach(bridge, lambda: sid)
            status.show_session(sid)
            assert run(session.send("one")).reason == "end_turn"  # two model requests
            assert run(session.send("two")).reason == "end_turn"  # one
        finally:
            run(runtimes.close())
            bridge.detach()
            bus.close()
    assert len(seen) == 3 and all(u.cost_usd > 0 for u in seen)
    lines = [ln for ln in view.toPlainText().splitlines() if ln.startswith("This turn:")]
    first = turn_cost_text(sum(u.input_tokens for u in seen[:2]), sum(u.output_tokens for u in seen[:2]),
                           sum(u.cost_usd for u in seen[:2]))
    second = turn_cost_text(seen[2].input_tokens, seen[2].output_tokens, seen[2].cost_usd)
    assert lines == [first, second]
    total = sum(u.cost_usd for u in seen)
    assert status.usage.text().endswith(f"${total:.4f}")
    costs = [float(m) for m in re.findall(r"\$([0-9.]+)", "\n".join(lines))]
    assert abs(sum(costs) - total) < 0.0002  # the turns add up to the session


def test_another_sessions_turn_leaves_no_cost_line_here(qtbot, qloop) -> None:
    from desktop_app.core import Done, MemoryStore

    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    view = ConversationView()
    qtbot.addWidget(view)
    view.attach(bridge, lambda: "s1")
    bus.publish(TokenUsage(session_id="s2", input_tokens=10, output_tokens=5, cost_usd=0.5))
    bus.publish(Done(session_id="s2"))
    bus.publish(TokenUsage(session_id="s1", input_tokens=10, output_tokens=5, cost_usd=0.01))
    bus.publish(Done(session_id="s1"))
    view.flush()
    assert [ln for ln in view.toPlainText().splitlines() if ln.startswith("This turn:")] == [
        "This turn: 10 tokens in · 5 out · $0.0100"]
    bridge.detach()
