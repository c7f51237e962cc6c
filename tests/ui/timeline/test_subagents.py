"""A sub-agent's calls in the timeline: nested under the task_run call that started it, live (through the
bridge's SubagentStarted) and from history (linked children), at any depth, under Qt's model tester."""

from __future__ import annotations

from desktop_app.core import EventBus, MemoryStore, SubagentStarted, ToolEnd, ToolStart
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui.timeline import TimelineModel
from tests.ui.helpers import make_record


def names(model: TimelineModel) -> list[str]:
    return [model.index(r, 1).data() for r in range(model.rowCount())]


def test_live_child_calls_nest_under_their_parent_call(qtbot, qtmodeltester) -> None:
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    model = TimelineModel()
    model.attach(bridge, lambda: "s1")
    bus.publish(ToolStart(session_id="s1", call_id="task", name="task_run", input={"task": "look"}))
    bus.publish(ToolStart(session_id="s1", call_id="read", name="fs_read", input={"path": "a"}))
    qtbot.waitUntil(lambda: model.rowCount() == 2)
    bus.publish(ToolStart(session_id="child", call_id="early", name="fs_grep", input={"pattern": "x"}))
    bus.publish(SubagentStarted(session_id="s1", call_id="task", child_session_id="child", name="explore 1"))
    bus.publish(SubagentStarted(session_id="other", call_id="x", child_session_id="stranger", name="no"))
    for i in range(2):
        bus.publish(ToolStart(session_id="child", call_id=f"c{i}", name="fs_grep", input={"pattern": str(i)}))
    bus.publish(SubagentStarted(session_id="child", call_id="c1", child_session_id="grandchild", name="deep"))
    bus.publish(ToolStart(session_id="grandchild", call_id="g0", name="fs_read", input={"path": "b"}))
    bus.publish(ToolStart(session_id="stranger", call_id="s0", name="bash_run", input={"command": "x"}))
    qtbot.waitUntil(lambda: model.rowCount() == 5)
    assert names(model) == ["Start a sub-agent", "⤷ Search files", "⤷ Search files", "  ⤷ Read file", "Read file"]
    assert model.row_of("early") == -1 and model.row_of("s0") == -1  # before the link / another session's
    assert model.row_of("read") == 4 and model.get("g0").depth == 2 and model.get("c0").parent_call_id == "task"
    bus.publish(ToolEnd(session_id="grandchild", call_id="g0", name="fs_read", state="COMPLETED", duration_ms=5.0))
    assert model.index(3, 0).data() == "done"
    qtmodeltester.check(model)
    model.clear()
    bus.publish(ToolStart(session_id="child", call_id="after", name="fs_grep", input={"pattern": "y"}))
    qtbot.wait(20)
    assert model.rowCount() == 0  # a cleared timeline (another session shown) forgets the links
    bridge.detach()


def test_history_links_children_before_their_records_load(qtmodeltester) -> None:
    model = TimelineModel()
    parent = make_record(1, name="task_run", session="s1")
    later = make_record(2, session="s1")
    kids = [make_record(10 + i, name="fs_read", session="child") for i in range(3)]
    model.link_child("child", parent.id)
    model.add_records([parent, *kids, later])
    assert names(model) == ["Start a sub-agent", "⤷ Read file", "⤷ Read file", "⤷ Read file", "Run command"]
    model.add_records([make_record(13, name="fs_glob", session="child")])  # a late one joins its siblings
    assert names(model)[4] == "⤷ Find files" and model.row_of("call_2") == 5
    refreshed = make_record(11, name="fs_read", session="child")
    model.update_record(refreshed)  # a fresh record keeps its place and depth
    assert model.get("call_11").depth == 1 and model.row_of("call_11") == 2
    qtmodeltester.check(model)
