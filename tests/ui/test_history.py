"""The audit history window over a real SQLite store: lazy paging, filters, open, export, verify."""

from __future__ import annotations

import csv
import json

from desktop_app.core import Outcome, ToolCallRecord, ToolCallState
from desktop_app.ui._history import HistoryModel, HistoryWindow

S = ToolCallState


async def fill(store, n: int) -> list[ToolCallRecord]:
    out = []
    for i in range(n):
        name = ("bash_run", "fs_read", "fs_write")[i % 3]
        data = {"command": f"make target{i}"} if name == "bash_run" else {"path": f"src/mod{i}.py"}
        rec = ToolCallRecord(name=name, input=data, id=f"call_{i:04d}", session_id=f"ses_{i % 2}",
                             project_id="prj_1", created_at=1_750_000_000 + i)
        await store.save_transition(rec, rec.transition(S.EXECUTING, actor="executor",
                                                        at=1_750_000_000 + i + 0.1))
        final = S.FAILED if i % 10 == 0 else S.COMPLETED
        await store.save_transition(rec, rec.transition(final, actor="executor", at=1_750_000_000 + i + 0.5,
                                                        outcome=Outcome.ERROR if final is S.FAILED else None))
        out.append(rec)
    await store.flush()
    return out


def test_history_model_pages_lazily_and_passes_the_model_tester(qtmodeltester, qtbot, run, store):
    run(fill(store, 130))
    model = HistoryModel(store, page=50)
    with qtbot.waitSignal(model.loaded) as loaded:
        run(model.search())
    assert loaded.args == [50, 130]
    assert model.rowCount() == 50 and model.canFetchMore()
    assert model.index(0, 0).data().startswith("2025-")  # newest first
    assert model.row(0).id == "call_0129"
    model.fetchMore()
    assert not model.canFetchMore()  # one page in flight at a time
    qtbot.waitUntil(lambda: model.rowCount() == 100)
    model.fetchMore()
    qtbot.waitUntil(lambda: model.rowCount() == 130)
    assert not model.canFetchMore()
    qtmodeltester.check(model)


def test_history_filters_by_tool_state_time_and_text(qtbot, run, store):
    run(fill(store, 60))
    model = HistoryModel(store)
    run(model.search(tool="bash_run"))
    assert model.total == 20 and {model.row(i).name for i in range(model.rowCount())} == {"bash_run"}
    run(model.search(states=["FAILED"]))
    assert model.total == 6
    run(model.search(since=1_750_000_000 + 50))
    assert model.total == 10
    run(model.search(text="target33"))
    assert [model.row(i).id for i in range(model.rowCount())] == ["call_0033"]


def test_history_window_opens_a_record_exports_and_verifies(qtbot, run, store, tmp_path):
    run(fill(store, 30))
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    win.text.setText("mod4")
    run(win.refresh())
    assert win.model.total == 1
    win.view.selectRow(0)
    qtbot.waitUntil(lambda: "Audit trail" in win.details.toPlainText())
    details = win.details.toPlainText()
    assert "fs_read" in details and "EXECUTING" in details and "src/mod4.py" in details

    win.text.setText("")
    run(win.refresh())
    win.view.selectRow(0)
    win.view.selectionModel().select(win.model.index(1, 0), win.view.selectionModel().SelectionFlag.Select
                                     | win.view.selectionModel().SelectionFlag.Rows)
    out = tmp_path / "sel.jsonl"
    assert run(win.export(str(out))) == 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["id"] for d in lines] == ["call_0029", "call_0028"] and len(lines[0]["trail"]) == 2
    win.view.clearSelection()
    csv_path = tmp_path / "all.csv"
    assert run(win.export(str(csv_path))) == 30  # nothing selected: every match
    with csv_path.open() as f:
        assert len(list(csv.reader(f))) == 31

    result = run(win.verify())
    assert result.ok and "chain intact" in win.verify_label.text()
