"""The window's side of questions and plans: a real AgentSession (the fake Anthropic server, the real executor,
ask_user and exit_plan_mode) asks; the inbox shows the question or the plan (Markdown, inert), the sidebar
says the session waits, and the person's click reaches the model."""

from __future__ import annotations

import asyncio

from desktop_app.config import Settings
from desktop_app.core import (
    AgentSession,
    AnthropicModelClient,
    EventBus,
    Executor,
    PermissionMode,
    PermissionPolicy,
    ProjectInfo,
    QuestionAsked,
    SessionInfo,
    ToolRegistry,
)
from desktop_app.tools import builtin_tools
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui._roles import Role
from desktop_app.ui.inbox import QuestionsPanel
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.ui.fake_desk import FakeDesk


def _desk(qtbot, run, store, tmp_path, server: AnthropicServer, mode: str):
    run(store.save_project(ProjectInfo("prj_1", "demo", str(tmp_path))))
    run(store.save_session(SessionInfo("ses_1", "prj_1", "demo session")))
    window = MainWindow()
    qtbot.addWidget(window)
    bus = run(EventBus.open(store))
    executor = Executor(ToolRegistry(builtin_tools()), PermissionPolicy(mode), bus=bus, store=store)
    model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=1)
    agents: dict[str, AgentSession] = {}

    async def factory(project, session_id):
        if session_id not in agents:
            agents[session_id] = await AgentSession.open(
                store=store, bus=bus, executor=executor, tools=list(executor.registry), model_client=model,
                project=project, sandbox=None, session_id=session_id)
        return agents[session_id]

    controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None),
                                                       factory=factory, api_key_source="test"))
    run(controller.start(check_docker=False))
    return window, controller, executor


def _sidebar_state(window: MainWindow) -> tuple[str, str]:
    return window.projects_model.session_index("ses_1").data(Role.AGENT_STATE)


def test_a_question_answered_in_the_window_reaches_the_model(qtbot, run, store, tmp_path) -> None:
    with AnthropicServer() as server:
        server.add(reply(tool_use("ask_user", {"question": "Which db?", "choices": ["sqlite", "postgres"]})),
                   lambda req: reply(text(req.last_tool_result_text())))
        window, controller, _ = _desk(qtbot, run, store, tmp_path, server, "ask")
        agent = run(controller.agent_for("ses_1"))
        turn = asyncio.ensure_future(agent.send("set up the db"))
        panel = window.inbox.questions
        qtbot.waitUntil(lambda: panel.current is not None, timeout=30_000)
        assert panel.isVisibleTo(window.inbox) and "Which db?" in panel.body.toPlainText()
        qtbot.waitUntil(lambda: _sidebar_state(window) == ("PAUSED", "question"))
        assert "asks you" in window.projects_model.session_index("ses_1").data()
        buttons = [panel.choices.itemAt(i).widget() for i in range(panel.choices.count())]
        assert [b.text() for b in buttons] == ["1. sqlite", "2. postgres"]
        buttons[1].click()
        result = run(turn, 30_000)
        assert result.text == "The person answered: postgres"
        assert panel.current is None and not panel.isVisibleTo(window.inbox)
        qtbot.waitUntil(lambda: _sidebar_state(window) == ("READY", ""))
        run(controller.close())


def test_a_plan_approved_in_the_window_switches_the_sessions_mode(qtbot, run, store, tmp_path) -> None:
    with AnthropicServer() as server:
        server.add(reply(tool_use("exit_plan_mode", {"plan": "## Plan\n\n1. **edit** `a.py`"})),
                   lambda req: reply(text(req.last_tool_result_text())))
        window, controller, executor = _desk(qtbot, run, store, tmp_path, server, "plan")
        agent = run(controller.agent_for("ses_1"))
        turn = asyncio.ensure_future(agent.send("plan it"))
        panel = window.inbox.questions
        qtbot.waitUntil(lambda: panel.current is not None, timeout=30_000)
        assert "Plan to review" in panel.header.text()
        html = panel.body.toHtml()
        assert "<h2" in html and "font-weight:700" in html, "rendered as Markdown"
        assert panel.approve_btn.isVisibleTo(panel) and not panel.send_btn.isVisibleTo(panel)
        panel.modes.setCurrentIndex(panel.modes.findData("accept-edits"))
        panel.approve_btn.click()
        result = run(turn, 30_000)
        assert "approved the plan" in result.text and "accept-edits" in result.text
        assert executor.policy.mode_for("ses_1") is PermissionMode.ACCEPT_EDITS
        run(controller.close())


def test_a_plan_renders_no_html_loads_no_resource_and_shows_hidden_characters(qtbot) -> None:
    panel = QuestionsPanel()
    qtbot.addWidget(panel)
    plan = ("# Plan\n\n<b>bold by html</b> <img src='file:///etc/passwd'> ![x](/etc/hostname)\n\n"
            "[click](https://evil.example/) and a bidi \u202eoverride")
    panel.add(QuestionAsked(session_id="s", question_id="q1", kind="plan", text=plan, modes=["ask"]))
    body = panel.body
    assert "<b>bold by html</b>" in body.toPlainText(), "raw HTML is shown as text"
    assert "\\u202e" in body.toPlainText() and "\u202e" not in body.toPlainText()
    assert body.loadResource(2, None) is None and not body.openLinks() and not body.openExternalLinks()
    answered: list = []
    panel.answered.connect(lambda *a: answered.append(a))
    panel.reply.setText("too risky")
    panel.reject_btn.click()
    assert answered and answered[0][2].approved is False and answered[0][2].note == "too risky"
    assert panel.current is None
