"""The history's Charts tab over a real store (SQLite and PostgreSQL): drawn when shown, from the same filters as the
list, redrawn by a search; checked by the data in each SVG (pygal's value and label elements), not by pixels."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from desktop_app.ui.history import HistoryWindow
from tests.ui.helpers import fill

KEYS = ["calls_per_day", "refusals", "risks", "approval_waits", "cost_per_day", "cost_per_project", "slowest_tools"]


def values(svg: str) -> list[float]:
    """The value of each bar or slice, as the SVG carries it (its unit, $ or ms, left out)."""
    root = ET.fromstring(svg)
    return [float(re.sub(r"[^0-9.\-]", "", e.text)) for e in root.iter() if e.tag.endswith("desc")
            and e.get("class", "").split() == ["value"] and e.text]


def texts(svg: str) -> list[str]:
    return [e.text for e in ET.fromstring(svg).iter() if e.tag.endswith("text") and e.text]


def test_the_charts_follow_the_history_filters(qtbot, run, store):
    run(fill(store, 30))  # 30 calls of three tools, 400 ms each; every tenth failed
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    win.show()
    run(win.refresh())
    assert win.charts.filters is None  # the Records tab is shown: nothing aggregated for charts nobody sees
    charts = run(win.show_charts())
    assert [c.key for c in charts] == KEYS
    per_day = win.charts.chart("calls_per_day")
    assert sum(values(per_day.svg)) == 30 and "30 calls" in per_day.title
    assert {"done", "failed"} <= set(texts(per_day.svg)) and "2025-06-15" in texts(per_day.svg)
    tools = texts(win.charts.chart("slowest_tools").svg)
    assert "bash_run (max 0.4 s, 10 calls)" in tools and values(win.charts.chart("slowest_tools").svg) == [400.0] * 3
    assert values(win.charts.chart("risks").svg) == [30.0]
    assert values(win.charts.chart("refusals").svg) == [] and "(0 denied)" in win.charts.chart("refusals").title
    assert all(v.renderer().isValid() and v.height() > 0 for v in win.charts.views)

    win.tool.setCurrentText("fs_read")  # a search redraws the charts shown, with the list's filters
    run(win.refresh())
    assert win.model.total == 10 and win.charts.filters == win.filters()
    assert sum(values(win.charts.chart("calls_per_day").svg)) == 10
    assert [t for t in texts(win.charts.chart("slowest_tools").svg) if "calls)" in t] == [
        "fs_read (max 0.4 s, 10 calls)"]

    win.tool.setCurrentText("")
    win.text.setText("mod4")  # free text too: the one fs_read of src/mod4.py
    win.state.setCurrentIndex(win.state.findData("COMPLETED"))
    run(win.refresh())
    assert sum(values(win.charts.chart("calls_per_day").svg)) == 1 == win.model.total

    win.tabs.setCurrentIndex(0)  # on the Records tab a search leaves the charts as they were...
    win.text.setText("")
    win.state.setCurrentIndex(0)
    run(win.refresh())
    assert sum(values(win.charts.chart("calls_per_day").svg)) == 1
    win.tabs.setCurrentWidget(win.charts)  # ...and showing them again draws the list's filters
    qtbot.waitUntil(lambda: sum(values(win.charts.chart("calls_per_day").svg)) == 30, timeout=15_000)
