"""The timeline's filter proxy: by state and by tool."""

from __future__ import annotations

from desktop_app.core import ToolCallState
from desktop_app.ui._roles import Role
from desktop_app.ui.timeline import TimelineFilter, TimelineModel
from tests.ui.helpers import make_record


def test_timeline_filter_by_state_and_tool():
    model = TimelineModel()
    recs = [make_record(i, "bash_run" if i % 2 else "fs_read",
                        ToolCallState.COMPLETED if i % 3 else ToolCallState.FAILED) for i in range(12)]
    model.add_records(recs)
    proxy = TimelineFilter()
    proxy.setSourceModel(model)
    proxy.set_states({"FAILED"})
    failed = {proxy.index(r, 0).data(Role.CALL_ID) for r in range(proxy.rowCount())}
    assert failed == {r.id for r in recs if r.state is ToolCallState.FAILED}
    proxy.set_tool("bash_run")
    both = {proxy.index(r, 0).data(Role.CALL_ID) for r in range(proxy.rowCount())}
    assert both == {r.id for r in recs if r.state is ToolCallState.FAILED and r.name == "bash_run"}
    proxy.set_states(None)
    proxy.set_tool(None)
    assert proxy.rowCount() == 12
