"""AppController's approval round trip: the inbox's Allow | Deny reaches the session's executor, and the
card goes whatever the executor does with it (a call no longer waiting must not stay on screen)."""

from __future__ import annotations

from desktop_app.config import Settings
from desktop_app.core import AgentDeskError, Allow, ApprovalScope, Deny, EventBus, ProjectInfo, SessionInfo
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui.inbox import PendingApproval
from tests.ui.fake_desk import FakeDesk


class _Executor:
    def __init__(self) -> None:
        self.decided: list[tuple[str, object]] = []
        self.stale = False

    def decide(self, call_id: str, decision: object) -> None:
        self.decided.append((call_id, decision))
        if self.stale:
            raise AgentDeskError(f"no tool call {call_id} is waiting for approval")


class _Agent:
    running = False

    def __init__(self, executor: _Executor) -> None:
        self.executor = executor


def test_a_decision_reaches_the_executor_and_a_stale_card_goes_with_a_notice(qtbot, run, store, tmp_path):
    executor = _Executor()

    async def factory(project, session_id):
        return _Agent(executor)

    run(store.save_project(ProjectInfo("prj_1", "demo", str(tmp_path))))
    run(store.save_session(SessionInfo("ses_1", "prj_1", "demo session")))
    window = MainWindow()
    qtbot.addWidget(window)
    bus = run(EventBus.open(store))
    controller = AppController(window, FakeDesk(store=store, bus=bus, settings=Settings(path=None),
                                                       factory=factory, api_key_source="test"))
    run(controller.start(check_docker=False))

    window.inbox.add(PendingApproval("c1", "ses_1", "bash_run", {"command": "ls"}))
    window.inbox.allow_selected()
    qtbot.waitUntil(lambda: window.inbox.model.rowCount() == 0)
    assert executor.decided == [("c1", Allow(ApprovalScope.ONCE))]

    executor.stale = True  # expired, or answered elsewhere
    window.inbox.add(PendingApproval("c2", "ses_1", "bash_run", {"command": "ls"}))
    window.inbox.note.setText("not now")
    window.inbox.deny_selected()
    qtbot.waitUntil(lambda: "no tool call c2 is waiting" in window.conversation.toPlainText())
    assert window.inbox.model.rowCount() == 0
    assert executor.decided[-1] == ("c2", Deny(note="not now"))
    run(controller.close())
