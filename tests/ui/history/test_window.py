"""The audit history window over a real SQLite store: open a record, export, verify, the tool filter."""

from __future__ import annotations

import csv
import json

from desktop_app.tools import builtin_tools
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


def test_tool_filter_lists_the_builtin_tools(qtbot):
    win = HistoryWindow(None)
    qtbot.addWidget(win)
    listed = [win.tool.itemText(i) for i in range(win.tool.count())]
    assert listed[0] == "" and sorted(listed[1:]) == sorted(t.name for t in builtin_tools())
    assert "bash_background" not in listed  # no such tool
