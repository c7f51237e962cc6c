"""The timeline's table model under Qt's model tester, fed by direct calls and by the bridge."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop_app.core import (
    EventBus,
    MemoryStore,
    StateChanged,
    ToolCallState,
    ToolEnd,
    ToolError,
    ToolStart,
    ToolUpdate,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._roles import Role
from desktop_app.ui.timeline import TimelineFilter, TimelineModel
from tests.ui.helpers import make_record


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
    model.update_record(make_record(7, state=ToolCallState.FAILED))
    assert model.row_of("call_7") == 5
    assert model.index(5, 4).data() == "1"  # exit code from the record's details


def test_timeline_loads_100k_rows_in_one_insert():
    # How fast is `make bench`'s timeline_100k_ms; here, that the view hears of it once, not 100,000 times.
    model = TimelineModel()
    recs = [make_record(i, state=ToolCallState.PENDING) for i in range(100_000)]
    inserts: list[tuple[int, int]] = []
    model.rowsInserted.connect(lambda _parent, first, last: inserts.append((first, last)))
    model.add_records(recs)
    assert inserts == [(0, 99_999)]
    assert model.rowCount() == 100_000
    assert model.row_of("call_99999") == 99_999


def test_attach_follows_the_current_sessions_tool_events_through_the_bridge(qtbot, run):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    loaded: list[str] = []

    async def load_record(call_id: str):
        loaded.append(call_id)
        rec = make_record(0, state=ToolCallState.COMPLETED, session="s1")
        rec.id = call_id
        return rec

    model = TimelineModel()
    model.attach(bridge, lambda: "s1", load_record=load_record)
    bus.publish(ToolStart(session_id="s1", call_id="c1", name="bash_run", input={"command": "make"}))
    bus.publish(ToolStart(session_id="s2", call_id="elsewhere", name="fs_read", input={"path": "a"}))
    qtbot.waitUntil(lambda: model.rowCount() == 1)
    assert model.row_of("elsewhere") == -1  # another session's calls are not shown
    bus.publish(StateChanged(session_id="s1", call_id="c1", name="bash_run", state="EXECUTING",
                             previous="PENDING"))
    assert model.index(0, 0).data() == "running"
    bus.publish(ToolUpdate(session_id="s1", call_id="c1", text="building\n"))
    bus.publish(ToolError(session_id="s1", call_id="c1", error="disk full"))
    assert model.output("c1") == "building\n\n[error] disk full\n"
    bus.publish(ToolEnd(session_id="s1", call_id="c1", name="bash_run", state="FAILED", outcome="error",
                        duration_ms=40.0))
    assert model.index(0, 0).data() == "failed" and model.index(0, 3).data() == "40 ms"
    qtbot.waitUntil(lambda: model.get("c1").record is not None)  # the full record, fetched when it ended
    assert loaded == ["c1"] and model.index(0, 4).data() == "0"
    bridge.detach()


def test_an_end_the_store_could_not_record_is_not_undone_by_the_stale_stored_record(qtbot, run):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    loaded: list[str] = []

    async def load_record(call_id: str):
        loaded.append(call_id)
        rec = make_record(0, state=ToolCallState.EXECUTING, session="s1")  # what the store last kept
        rec.id = call_id
        return rec

    model = TimelineModel()
    model.attach(bridge, lambda: "s1", load_record=load_record)
    # A tool_use still streaming has no record: no row for it.
    bus.publish(ToolStart(session_id="s1", tool_use_id="toolu_1", name="bash_run", partial=True))
    bus.publish(ToolStart(session_id="s1", call_id="c1", tool_use_id="toolu_1", name="bash_run",
                          input={"command": "make"}))
    qtbot.waitUntil(lambda: model.rowCount() == 1)
    assert model.row_of("toolu_1") == -1 and model.row_of("c1") == 0
    bus.publish(ToolError(session_id="s1", call_id="c1", error="the audit store could not record this call"))
    bus.publish(ToolEnd(session_id="s1", call_id="c1", name="bash_run", state="FAILED", outcome="error",
                        is_error=True, summary="not recorded"))
    qtbot.waitUntil(lambda: loaded == ["c1"])
    qtbot.wait(50)  # the refresh ran: the row still shows the end
    assert model.get("c1").state is ToolCallState.FAILED and model.index(0, 0).data() == "failed"
    assert "audit store" in model.output("c1")
    bridge.detach()


def test_a_100k_session_builds_rows_only_for_what_is_read(qtbot):
    # The load keeps the records; a row (summary, exit code, server) is built when the view asks for it.
    from desktop_app.ui.timeline import TimelineDock

    model = TimelineModel()
    dock = TimelineDock(model)
    qtbot.addWidget(dock)
    dock.resize(700, 600)
    dock.show()
    recs = [make_record(i, ("bash_run", "fs_read", "mcp__git__git_status")[i % 3]) for i in range(100_000)]
    model.add_records(recs)
    dock.view.scrollToBottom()
    qtbot.waitUntil(lambda: model.rows_built() > model.rowCount() // 3)  # the MCP calls: their servers listed
    on_screen = dock.view.viewport().height() // dock.view.verticalHeader().defaultSectionSize() + 2
    assert model.rows_built() <= 100_000 // 3 + 1 + on_screen + 10
    assert model.servers() == ["git"]
    assert model.index(99_999, 2).data() == "echo 99999" and model.index(99_999, 4).data() == "0"
    assert model.get("call_5").record is recs[5] and model.row_of("call_5") == 5
    model.add_records([make_record(5, "fs_read", ToolCallState.FAILED)])  # a known id updates its row
    assert model.rowCount() == 100_000 and model.get("call_5").state is ToolCallState.FAILED


def test_filtering_a_large_session_builds_no_row_for_a_builtin_call(qtbot):
    model = TimelineModel()
    model.add_records([make_record(i, state=ToolCallState.FAILED if i % 10 == 0 else ToolCallState.COMPLETED)
                       for i in range(20_000)])
    proxy = TimelineFilter()
    proxy.setSourceModel(model)
    proxy.set_states({"FAILED"})
    assert proxy.rowCount() == 2_000 and model.rows_built() == 0
    proxy.set_tool("fs_read")
    assert proxy.rowCount() == 0 and model.rows_built() == 0


def test_the_dock_puts_its_filter_in_on_first_use_and_keeps_the_selected_call(qtbot):
    from desktop_app.ui.timeline import TimelineDock

    model = TimelineModel()
    dock = TimelineDock(model)
    qtbot.addWidget(dock)
    model.add_records([make_record(i, state=ToolCallState.FAILED if i % 2 else ToolCallState.COMPLETED)
                       for i in range(10)])
    assert dock.view.model() is model  # no proxy between them while nothing is filtered
    assert dock.select_call("call_3") and dock.current_call() == "call_3"
    dock.state_filter.setCurrentText("Failed or denied")
    assert dock.view.model() is dock.proxy and dock.proxy.rowCount() == 5
    assert dock.current_call() == "call_3"
    assert dock.view.selectionModel().currentIndex().data(Role.CALL_ID) == "call_3"
    assert dock.view.columnWidth(0) == 132  # the widths survive the new model
    assert dock.select_call("call_4") and dock.state_filter.currentIndex() == 0  # a hidden call clears it
    assert dock.proxy.rowCount() == 10 and dock.current_call() == "call_4"


def test_the_state_column_says_exit_n_in_red_and_a_plans_answer(qapp):
    """A command that exited 1 is "exit 1" in red, never a green "done"; an approved plan and a rejected one
    read differently; a command that exited 0 and a plain call are "done"."""
    from desktop_app.core import Outcome, ToolCallRecord

    def rec(cid, name, inp, details):
        return ToolCallRecord(name=name, input=inp, id=cid, state=ToolCallState.COMPLETED, outcome=Outcome.OK,
                              result={"content": [{"type": "text", "text": "x"}], "details": details})

    model = TimelineModel()
    model.add_records([
        rec("c1", "bash_run", {"command": "pytest"}, {"exit_code": 1, "stderr": "No module named pytest\n"}),
        rec("c2", "bash_run", {"command": "ls"}, {"exit_code": 0, "stdout": "a\n"}),
        rec("c3", "exit_plan_mode", {"plan": "# Fix it"}, {"approved": True, "mode": "accept-edits"}),
        rec("c4", "exit_plan_mode", {"plan": "# Fix it"}, {"approved": False, "note": "not yet"}),
        rec("c5", "fs_read", {"path": "a"}, {}),
    ])
    words = [model.index(r, 0).data() for r in range(5)]
    assert words == ["exit 1", "done", "approved", "rejected", "done"]
    colours = [model.index(r, 0).data(Qt.ItemDataRole.ForegroundRole).name() for r in range(5)]
    assert colours[0] == "#d9363e" and colours[1] == colours[4] == "#2f9e44"  # red; green for the good ones
    assert colours[2] != colours[3]
    assert "exit 1" in model.index(0, 1).data(Qt.ItemDataRole.ToolTipRole)
    assert model.index(0, 0).data(Qt.ItemDataRole.DecorationRole) is not None
    # live: the end event says COMPLETED before the record is fetched; the record's exit code turns it red
    model.upsert_started("c6", "bash_run", {"command": "false"})
    model.flush()
    model.end("c6", "COMPLETED", "ok", 5.0)
    model.update_record(rec("c6", "bash_run", {"command": "false"}, {"exit_code": 1}))
    assert model.index(5, 0).data() == "exit 1"
    from desktop_app.ui.timeline._details import render_call_details

    heading = render_call_details(model.row_at(0)).split("</h3>")[0]
    assert "exit 1" in heading and "#d9363e" in heading and "done" not in heading  # the details say it too
