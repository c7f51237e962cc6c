"""The audit history window over a real SQLite store: open a record, export, verify, the tool filter."""

from __future__ import annotations

import csv
import json

from desktop_app.tools import builtin_tools
from desktop_app.ui._roles import Role
from desktop_app.ui.history import HistoryWindow
from tests.ui.helpers import fill


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
    assert win.export_selected_btn.isEnabled() and win.export_selected_btn.text() == "Export 2 selected…"
    assert run(win.export(str(out), selected=True)) == 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["id"] for d in lines] == ["call_0029", "call_0028"] and len(lines[0]["trail"]) == 2
    csv_path = tmp_path / "all.csv"
    assert win.export_btn.text() == "Export 30 records…"
    assert run(win.export(str(csv_path))) == 30  # Export writes what the list shows, a selection or not
    with csv_path.open() as f:
        assert len(list(csv.reader(f))) == 31

    result = run(win.verify())
    assert result.ok and "chain intact" in win.verify_label.text()


def test_tool_filter_lists_the_builtin_tools(qtbot):
    win = HistoryWindow(None)
    qtbot.addWidget(win)
    listed = [win.tool.itemText(i) for i in range(win.tool.count())]
    assert listed[0] == "" and sorted(listed[1:]) == sorted(t.name for t in builtin_tools())
    assert "bash_background" not in listed  # no such tool


def test_export_writes_every_record_the_list_shows_even_with_one_row_open(qtbot, run, store, tmp_path):
    """Seen: a search listed 2 matches and Export wrote 1 record. Clicking a row to read its details selects it,
    and Export exported the selection. Export now writes the list; the selection has its own button."""
    run(fill(store, 30))
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    win.text.setText("mod1*")  # mod1, mod10..mod19: more than one match
    run(win.refresh())
    listed = [win.model.data(win.model.index(i, 0), Role.CALL_ID) for i in range(win.model.rowCount())]
    assert win.model.total == len(listed) > 1
    assert win.status.text().startswith(f"{len(listed)} records match")
    win.view.selectRow(0)  # the person reads the first match's details
    qtbot.waitUntil(lambda: "Audit trail" in win.details.toPlainText())
    out = tmp_path / "shown.jsonl"
    assert run(win.export(str(out))) == len(listed)
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == listed
    win.text.setText("mod4")  # a new search does not keep showing the old search's record
    run(win.refresh())
    assert win.details.toPlainText() == "" and win.status.text().startswith("1 record match")


def test_export_asks_where_starting_in_the_home_folder_not_the_working_one(qtbot, qloop, store, monkeypatch, tmp_path):
    from pathlib import Path

    from PySide6.QtWidgets import QApplication, QFileDialog

    monkeypatch.setenv("HOME", str(tmp_path))
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    task = qloop.create_task(win.export_interactive())
    qtbot.waitUntil(lambda: any(isinstance(w, QFileDialog) and w.isVisible() for w in QApplication.topLevelWidgets()))
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QFileDialog) and w.isVisible())
    assert Path(dlg.directory().absolutePath()) == tmp_path
    assert dlg.selectedFiles()[0].startswith(str(tmp_path / "agent-desk-audit-"))
    dlg.reject()
    qtbot.waitUntil(task.done)


def test_the_history_filters_by_project_and_risk_and_exports_what_it_lists(qtbot, run, store, tmp_path):
    from desktop_app.core import ProjectInfo, Risk, ToolCallRecord, ToolCallState

    for p in ("alpha", "beta"):
        run(store.save_project(ProjectInfo(f"prj_{p}", p, str(tmp_path / p))))
    want = set()
    for i in range(24):  # every other call the beta project's, a third of them high risk
        project, risk = ("prj_beta" if i % 2 else "prj_alpha"), (Risk.HIGH if i % 3 == 0 else Risk.LOW)
        rec = ToolCallRecord(name="bash_run", input={"command": f"make t{i}"}, id=f"call_{i:04d}",
                             session_id="ses_1", project_id=project, risk=risk, created_at=1_750_000_000 + i)
        run(store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor")))
        if project == "prj_beta" and risk is Risk.HIGH:
            want.add(rec.id)
    run(store.flush())
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    run(win.refresh())
    assert [win.project.itemText(i) for i in range(win.project.count())] == ["any project", "alpha", "beta"]
    win.project.setCurrentIndex(win.project.findData("prj_beta"))
    win.risk.setCurrentIndex(win.risk.findData("high"))
    run(win.refresh())
    listed = {win.model.data(win.model.index(i, 0), Role.CALL_ID) for i in range(win.model.rowCount())}
    assert listed == want and win.model.total == len(want) == 4
    out = tmp_path / "beta-high.jsonl"
    assert run(win.export(str(out))) == len(want)
    assert {json.loads(line)["id"] for line in out.read_text().splitlines()} == want


def test_the_history_filters_by_who_decided(qtbot, run, store):
    from desktop_app.core import Approval, ToolCallRecord, ToolCallState

    by_person = set()
    for i in range(12):  # every third call's approval answered by a person; the others the desk let run
        rec = ToolCallRecord(name="fs_write", input={"path": f"f{i}"}, id=f"call_{i:04d}", session_id="ses_1",
                             project_id="prj_1", created_at=1_750_000_000 + i)
        if i % 3 == 0:
            rec.approval = Approval(required=True, decision="allow", decided_by="ada", decided_at=1.0)
            by_person.add(rec.id)
        run(store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor")))
    run(store.flush())
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    for decider, want in (("person", by_person), ("desk", {f"call_{i:04d}" for i in range(12)} - by_person)):
        win.decider.setCurrentIndex(win.decider.findData(decider))
        run(win.refresh())
        listed = {win.model.data(win.model.index(i, 0), Role.CALL_ID) for i in range(win.model.rowCount())}
        assert listed == want, decider
