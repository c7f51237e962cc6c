"""Compaction in the window: File › Compact conversation summarises the current session with the model (the local
fake Anthropic server), the conversation shows a notice with the summary, and a reload shows it again in its
place, never as a message the person wrote; the store keeps every original message."""

from __future__ import annotations

from desktop_app.config import Settings
from desktop_app.core import (
    AgentSession,
    AnthropicModelClient,
    CompactionSettings,
    EventBus,
    Executor,
    PermissionPolicy,
    ProjectInfo,
    SessionInfo,
    ToolRegistry,
    is_summary,
)
from desktop_app.ui import AppController, MainWindow
from tests.fakes.anthropic_server import AnthropicServer, reply, text
from tests.ui.fake_desk import FakeDesk


def test_compact_by_hand_shows_a_notice_and_keeps_the_originals(qtbot, run, store, tmp_path):
    with AnthropicServer() as server:
        server.add(reply(text("Found it in prices.py.")), reply(text("Fixed.")),
                   reply(text("Goal: fix the price bug. Done: fixed prices.py.")))
        window = MainWindow()
        qtbot.addWidget(window)
        bus = run(EventBus.open(store))
        model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=0)

        async def factory(project, session_id):
            executor = Executor(ToolRegistry([]), PermissionPolicy("ask"), bus=bus, store=store)
            return await AgentSession.open(store=store, bus=bus, executor=executor, tools=[], model_client=model,
                                           project=project, sandbox=None, session_id=session_id,
                                           compaction=CompactionSettings(compact_at=0))

        run(store.save_project(ProjectInfo("prj_1", "shop", str(tmp_path))))
        run(store.save_session(SessionInfo("ses_1", "prj_1", "Fix prices")))
        controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None),
                                                           factory=factory, api_key_source="test"))
        run(controller.start(check_docker=False))
        run(controller.select_session("ses_1"))
        run(controller.send("find the price bug"))
        run(controller.send("fix it"))
        window.compact_act.trigger()
        qtbot.waitUntil(lambda: "Conversation compacted by hand" in window.conversation.toPlainText(), timeout=30_000)
        shown = window.conversation.toPlainText()
        assert "2 earlier messages summarised" in shown and "Goal: fix the price bug" in shown
        stored = run(store.messages("ses_1"))
        assert len(stored) == 5 and is_summary(stored[-1])
        assert [m.content[0]["text"] for m in stored[:4]] == ["find the price bug", "Found it in prices.py.",
                                                               "fix it", "Fixed."]
        run(controller.select_session("ses_1"))  # reloaded from the store
        qtbot.waitUntil(lambda: "Conversation compacted by hand" in window.conversation.toPlainText())
        again = window.conversation.toPlainText()
        assert again.count("You") == 2 and again.index("Fixed.") < again.index("Conversation compacted")
        run(controller.close())
        run(model.close())
