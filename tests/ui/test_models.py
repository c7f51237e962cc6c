"""The window's models under Qt's model tester, and their behaviour when fed events."""

from __future__ import annotations

import time

from desktop_app.core import Outcome, ProjectInfo, SessionInfo, ToolCallRecord, ToolCallState
from desktop_app.ui._inbox import InboxModel, PendingApproval
from desktop_app.ui._projects import IdRole, ProjectsModel, SessionSearchFilter, SubtitleRole
from desktop_app.ui._timeline import CallIdRole, TimelineFilter, TimelineModel

S = ToolCallState


def make_record(i: int, name: str = "bash_run", state: ToolCallState = S.COMPLETED, session: str = "ses_1"):
    rec = ToolCallRecord(name=name, input={"command": f"echo {i}"}, id=f"call_{i}", session_id=session)
    if state is not S.PENDING:
        rec.transition(S.EXECUTING, actor="executor")
        if state.terminal:
            rec.transition(state, actor="executor",
                           outcome=Outcome.OK if state is S.COMPLETED else Outcome.ERROR)
        rec.result = {"content": [{"type": "text", "text": str(i)}], "details": {"exit_code": i % 3}}
    return rec


def test_timeline_model_passes_the_model_tester(qtmodeltester):
    model = TimelineModel()
    model.add_records([make_record(i) for i in range(20)])
    qtmodeltester.check(model)
    proxy = TimelineFilter()
    proxy.setSourceModel(model)
    qtmodeltester.check(proxy)


def test_timeline_follows_events_and_batches_inserts(qtbot):
    model = TimelineModel()
    inserts: list[tuple[int, int]] = []
    model.rowsInserted.connect(lambda _p, a, b: inserts.append((a, b)))
    for i in range(5):
        model.upsert_started(f"c{i}", "fs_read", {"path": f"f{i}.txt"})
    assert model.rowCount() == 0  # not yet: inserted together on the next loop turn
    qtbot.waitUntil(lambda: model.rowCount() == 5)
    assert inserts == [(0, 4)]
    model.set_state("c2", "EXECUTING")
    model.append_output("c2", "line 1\n")
    model.end("c2", "COMPLETED", "ok", 12.0)
    row = model.row_of("c2")
    assert model.index(row, 0).data() == "done"
    assert model.index(row, 2).data() == "f2.txt"
    assert model.index(row, 3).data() == "12 ms"
    assert model.output("c2") == "line 1\n"
    model.update_record(make_record(7, state=S.FAILED))
    assert model.row_of("call_7") == 5
    assert model.index(5, 4).data() == "1"  # exit code from the record's details


def test_timeline_filter_by_state_and_tool():
    model = TimelineModel()
    recs = [make_record(i, "bash_run" if i % 2 else "fs_read", S.COMPLETED if i % 3 else S.FAILED)
            for i in range(12)]
    model.add_records(recs)
    proxy = TimelineFilter()
    proxy.setSourceModel(model)
    proxy.set_states({"FAILED"})
    failed = {proxy.index(r, 0).data(CallIdRole) for r in range(proxy.rowCount())}
    assert failed == {r.id for r in recs if r.state is S.FAILED}
    proxy.set_tool("bash_run")
    both = {proxy.index(r, 0).data(CallIdRole) for r in range(proxy.rowCount())}
    assert both == {r.id for r in recs if r.state is S.FAILED and r.name == "bash_run"}
    proxy.set_states(None)
    proxy.set_tool(None)
    assert proxy.rowCount() == 12


def test_timeline_loads_100k_rows_in_one_insert():
    model = TimelineModel()
    recs = [make_record(i, state=S.PENDING) for i in range(100_000)]
    t = time.perf_counter()
    model.add_records(recs)
    elapsed = time.perf_counter() - t
    assert model.rowCount() == 100_000
    assert model.row_of("call_99999") == 99_999
    assert elapsed < 2.0, f"loading 100k rows took {elapsed:.2f}s"


def test_inbox_model_passes_the_model_tester(qtmodeltester):
    model = InboxModel()
    for i in range(5):
        model.add(PendingApproval(f"c{i}", "ses", "bash_run", {"command": "ls"}, expires_at=time.time() + 60))
    qtmodeltester.check(model)
    assert model.remove("c2") is not None
    assert model.rowCount() == 4
    assert not model.add(PendingApproval("c1", "ses", "bash_run", {}))  # no duplicates
    qtmodeltester.check(model)


def test_inbox_item_from_a_stored_record_keeps_risk_reason_and_expiry():
    rec = ToolCallRecord(name="fs_write", input={"path": "a.txt", "content": "x"}, session_id="s", risk="high")
    rec.transition(S.APPROVAL_REQUIRED, actor="policy")
    rec.approval.meta = {"reason": "fs_write can change things and mode ask asks first"}
    rec.approval.expires_at = time.time() + 30
    item = PendingApproval.from_record(rec)
    assert item.risk == "high"
    assert item.why == "fs_write can change things and mode ask asks first"
    assert 0 < item.remaining_s() <= 30


def _projects():
    now = time.time()
    projects = [ProjectInfo("p1", "alpha", "/tmp/a"), ProjectInfo("p2", "beta", "/tmp/b", permission_mode="auto")]
    sessions = [SessionInfo("s1", "p1", "Fix the parser", updated_at=now - 5),
                SessionInfo("s2", "p1", "Write docs", updated_at=now),
                SessionInfo("s3", "p2", "Refactor parser tests", updated_at=now)]
    return projects, sessions


def test_projects_model_passes_the_model_tester(qtmodeltester):
    model = ProjectsModel()
    model.set_data(*_projects())
    qtmodeltester.check(model)
    model.upsert_session(SessionInfo("s4", "p2", "New one"))
    model.upsert_project(ProjectInfo("p3", "gamma", "/tmp/c"))
    qtmodeltester.check(model)
    p1 = model.index(0, 0)
    assert model.rowCount(p1) == 2
    assert model.index(0, 0, p1).data() == "Write docs"  # newest first
    assert "auto" in model.index(1, 0).data(SubtitleRole)  # folder · image · mode


def test_session_search_keeps_the_parent_project(qtmodeltester):
    model = ProjectsModel()
    model.set_data(*_projects())
    proxy = SessionSearchFilter()
    proxy.setSourceModel(model)
    proxy.setFilterFixedString("parser")
    qtmodeltester.check(proxy)
    found = {proxy.index(r, 0, proxy.index(p, 0)).data(IdRole)
             for p in range(proxy.rowCount()) for r in range(proxy.rowCount(proxy.index(p, 0)))}
    assert found == {"s1", "s3"}
