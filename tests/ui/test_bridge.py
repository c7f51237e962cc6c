"""EventBridge: bus events become typed Qt signals, and detach stops them."""

from __future__ import annotations

from desktop_app.core import EventBus, MemoryStore, PermissionRequired, StateChanged, TextChunk, TokenUsage
from desktop_app.ui._bridge import EventBridge


def test_bridge_turns_bus_events_into_typed_signals(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    with qtbot.waitSignal(bridge.textChunk) as text:
        bus.publish(TextChunk(session_id="s1", text="hi", message_id="m1"))
    assert text.args == ["s1", "m1", "hi"]
    with qtbot.waitSignal(bridge.permissionRequired) as perm:
        bus.publish(PermissionRequired(session_id="s1", call_id="c1", name="bash_run", input={"command": "ls"}))
    assert isinstance(perm.args[0], PermissionRequired) and perm.args[0].call_id == "c1"
    with qtbot.waitSignal(bridge.tokenUsage) as usage:
        bus.publish(TokenUsage(session_id="s1", input_tokens=3, output_tokens=4, cost_usd=0.5))
    assert usage.args[0].output_tokens == 4
    bridge.detach()
    with qtbot.assertNotEmitted(bridge.stateChanged):
        bus.publish(StateChanged(session_id="s1", call_id="c1", state="APPROVED"))
