"""Builders shared by the UI tests."""

from __future__ import annotations

from desktop_app.core import Outcome, ToolCallRecord, ToolCallState


def make_record(i: int, name: str = "bash_run", state: ToolCallState = ToolCallState.COMPLETED, session: str = "ses_1"):
    rec = ToolCallRecord(name=name, input={"command": f"echo {i}"}, id=f"call_{i}", session_id=session)
    if state is not ToolCallState.PENDING:
        rec.transition(ToolCallState.EXECUTING, actor="executor")
        if state.terminal:
            rec.transition(state, actor="executor",
                           outcome=Outcome.OK if state is ToolCallState.COMPLETED else Outcome.ERROR)
        rec.result = {"content": [{"type": "text", "text": str(i)}], "details": {"exit_code": i % 3}}
    return rec


async def fill(store, n: int) -> list[ToolCallRecord]:
    out = []
    for i in range(n):
        name = ("bash_run", "fs_read", "fs_write")[i % 3]
        data = {"command": f"make target{i}"} if name == "bash_run" else {"path": f"src/mod{i}.py"}
        rec = ToolCallRecord(name=name, input=data, id=f"call_{i:04d}", session_id=f"ses_{i % 2}",
                             project_id="prj_1", created_at=1_750_000_000 + i)
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor",
                                                        at=1_750_000_000 + i + 0.1))
        final = ToolCallState.FAILED if i % 10 == 0 else ToolCallState.COMPLETED
        outcome = Outcome.ERROR if final is ToolCallState.FAILED else None
        await store.save_transition(rec, rec.transition(final, actor="executor", at=1_750_000_000 + i + 0.5,
                                                        outcome=outcome))
        out.append(rec)
    await store.flush()
    return out


def shown_words(rec: ToolCallRecord) -> set[str]:
    """The word `rec` is shown with in the timeline, the details' heading, the history and the export (one
    word when they agree)."""
    import io
    import json
    import re

    from desktop_app.runtime import write_records
    from desktop_app.ui.history._model import HistoryModel, HistoryRow
    from desktop_app.ui.timeline import TimelineModel, TimelineRow, render_call_details

    row = TimelineRow.from_record(rec)
    heading = re.search(r"<h3>.*?<span[^>]*>(.*?)</span></h3>", render_call_details(row, rec=rec))
    out = io.StringIO()
    write_records([rec], "jsonl", out)
    return {TimelineModel._display(row, 0), heading.group(1) if heading else "",
            HistoryModel()._display(HistoryRow.of(rec), 1), json.loads(out.getvalue())["status"]}


def window_on(qtbot, run, store, project):
    """The window on a stored project (a ProjectInfo) with one session, its runtimes on LocalSandboxes, started:
    (window, controller, runtimes). The caller closes the controller, then the runtimes."""
    from desktop_app.config import Settings
    from desktop_app.core import EventBus, SessionInfo
    from desktop_app.runtime import Desk, ProjectRuntimes
    from desktop_app.sandbox import LocalSandbox
    from desktop_app.ui import AppController, MainWindow

    run(store.save_project(project))
    run(store.save_session(SessionInfo("ses_1", project.id, "first")))
    bus = run(EventBus.open(store))
    rts = ProjectRuntimes(settings=Settings(api_key="sk-test"), store=store, bus=bus,
                          sandbox_factory=lambda p: LocalSandbox(p.path))
    window = MainWindow()
    qtbot.addWidget(window)
    controller = AppController(window, Desk(settings=Settings(path=None), store=store, bus=bus, runtimes=rts,
                                            api_key_source="test"))
    run(controller.start(check_docker=False))
    return window, controller, rts
