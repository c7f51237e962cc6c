"""The agent's state in the window: the bridge sends the agent's `state_changed` (scope agent) to its own
signal, never to the per-call one, and the sidebar's session row says the state live."""

from __future__ import annotations

from desktop_app.core import (
    AgentStateChanged,
    EventBus,
    FileChanged,
    MemoryStore,
    ProjectInfo,
    SessionInfo,
    StateChanged,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._projects import ProjectsModel
from desktop_app.ui._roles import Role
from desktop_app.ui.timeline._model import HOST_CHANGE, TimelineModel


def test_the_agents_state_has_its_own_signal_and_the_calls_keep_theirs(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    with qtbot.assertNotEmitted(bridge.stateChanged), qtbot.waitSignal(bridge.agentStateChanged) as agent:
        bus.publish(AgentStateChanged(session_id="s1", state="PAUSED", previous="WORKING", why="w", reason="plan"))
    assert isinstance(agent.args[0], AgentStateChanged) and agent.args[0].reason == "plan"
    with qtbot.assertNotEmitted(bridge.agentStateChanged), qtbot.waitSignal(bridge.stateChanged) as call:
        bus.publish(StateChanged(session_id="s1", call_id="c1", state="EXECUTING"))
    assert type(call.args[0]) is StateChanged


def test_the_sidebar_row_follows_the_agent(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    model = ProjectsModel()
    model.attach_agent_states(bridge)
    model.set_data([ProjectInfo("p1", "demo", "/tmp/demo")], [SessionInfo("s1", "p1", "Fix the bug")])
    idx = model.session_index("s1")
    assert idx.data() == "Fix the bug" and idx.data(Role.AGENT_STATE) == ("READY", "")
    for state, reason, label in (("WORKING", "", "working…"), ("PAUSED", "approval", "waits for approval"),
                                 ("PAUSED", "question", "asks you"), ("STOPPED", "", "stopped"), ("READY", "", "")):
        with qtbot.waitSignal(model.dataChanged):
            bus.publish(AgentStateChanged(session_id="s1", state=state, reason=reason, why=f"because {state}"))
        assert idx.data(Role.AGENT_STATE) == (state, reason)
        assert idx.data() == (f"{label} · Fix the bug" if label else "Fix the bug")
        assert f"because {state}" in idx.data(0x3)  # the tooltip says why
        assert idx.data(0x1) is not None  # a coloured dot


def test_a_host_change_is_a_row_of_its_own_in_the_current_sessions_timeline(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    model = TimelineModel()
    model.attach_host_changes(bridge, lambda: "s1")
    bus.publish(FileChanged(session_id="other", paths=["x"], kinds=["modified"]))
    bus.publish(FileChanged(session_id="s1", paths=["src/a.py", "b.txt"], kinds=["modified", "deleted"]))
    qtbot.waitUntil(lambda: model.rowCount() == 1)
    row = model.row_at(0)
    assert row.name == HOST_CHANGE and "modified src/a.py" in row.summary and "deleted b.txt" in row.summary
