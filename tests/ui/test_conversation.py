"""ConversationView: streamed text through the real bus, Markdown with highlighted code, tool cards
linked to the timeline, and its own subscription to the bridge."""

from __future__ import annotations

from PySide6.QtCore import QUrl

from desktop_app.core import (
    Done,
    ErrorEvent,
    EventBus,
    MemoryStore,
    StateChanged,
    TextChunk,
    ToolEnd,
    ToolStart,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._conversation import ConversationView, split_fences


def test_streamed_chunks_are_painted_once_per_frame_then_rendered_as_markdown(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    view = ConversationView()
    qtbot.addWidget(view)
    bridge.textChunk.connect(lambda _s, mid, t: view.append_chunk(mid, t))
    answer = "Here is **the fix**:\n\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    for ch in answer:  # one chunk per character, all in the same loop turn
        bus.publish(TextChunk(session_id="s", text=ch, message_id="m1"))
    assert view.chunks_painted == 0
    qtbot.waitUntil(lambda: view.chunks_painted >= 1)
    assert view.chunks_painted == 1  # coalesced into one paint
    assert view.toPlainText().endswith(answer)
    view.finish_message()
    text = view.toPlainText()
    assert "**" not in text and "```" not in text  # rendered, not raw Markdown
    assert "return a + b" in text and "    return" in text  # indentation kept
    html = view.toHtml()
    assert "font-weight" in html and "def" in text
    # pygments coloured the keyword: the code has more than one foreground colour
    assert html.count("color:#") >= 3


def test_split_fences_separates_prose_and_code():
    parts = split_fences("a\n```sh\nls -la\n```\nb")
    assert parts == [("a\n", None), ("ls -la", "sh"), ("\nb", None)]
    assert split_fences("```\nunterminated") == [("unterminated", "")]


def test_tool_card_click_asks_to_select_the_timeline_row(qtbot, qloop):
    view = ConversationView()
    qtbot.addWidget(view)
    view.add_tool_card("call_42", "bash_run", {"command": "pytest -q"})
    assert "bash_run" in view.toPlainText() and "pending" in view.toPlainText()
    view.update_tool_card("call_42", "COMPLETED", 1500)
    assert "done · 1.5 s" in view.toPlainText()
    with qtbot.waitSignal(view.callActivated) as sig:
        view.anchorClicked.emit(QUrl("call:call_42"))
    assert sig.args == ["call_42"]


def test_tool_start_then_card_and_text_keep_their_order(qtbot, qloop):
    view = ConversationView()
    qtbot.addWidget(view)
    view.append_chunk("m1", "Let me look.")
    view.add_tool_card("c1", "fs_read", ToolStart(input={"path": "a.py"}).input)
    view.append_chunk("m2", "It is fine.")
    view.finish_message()
    text = view.toPlainText()
    assert text.index("Let me look.") < text.index("fs_read") < text.index("It is fine.")


def test_attach_shows_the_current_sessions_text_cards_and_endings(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    view = ConversationView()
    qtbot.addWidget(view)
    view.attach(bridge, lambda: "s1")
    bus.publish(TextChunk(session_id="s1", text="Running the tests.", message_id="m1"))
    bus.publish(TextChunk(session_id="s2", text="Not this session.", message_id="m9"))
    bus.publish(ToolStart(session_id="s1", call_id="c1", name="bash_run", input={"command": "pytest -q"}))
    bus.publish(ToolStart(session_id="s2", call_id="c9", name="fs_read", input={"path": "x"}))
    assert view.has_card("c1") and not view.has_card("c9")
    bus.publish(StateChanged(session_id="s1", call_id="c1", state="EXECUTING", previous="PENDING"))
    assert "running" in view.toPlainText()
    bus.publish(ToolEnd(session_id="s1", call_id="c1", name="bash_run", state="", duration_ms=1500.0))
    assert "done · 1.5 s" in view.toPlainText()  # no state given: completed
    bus.publish(ErrorEvent(session_id="s1", message="overloaded", retrying=True, attempt=1))
    assert "overloaded" not in view.toPlainText()  # a retry is the status bar's to show
    bus.publish(ErrorEvent(session_id="s1", message="the model is gone"))
    bus.publish(Done(session_id="s1", reason="interrupted"))
    text = view.toPlainText()
    assert "Running the tests." in text and "Not this session." not in text
    assert "⚠ the model is gone" in text and text.rstrip().endswith("Interrupted.")
    bridge.detach()


def test_a_streamed_card_becomes_its_records_card_even_when_the_model_repeats_its_id(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    view = ConversationView()
    qtbot.addWidget(view)
    view.attach(bridge, lambda: "s1")
    # Two tool_use blocks of one message with the same model id, streamed before they have records.
    for _ in range(2):
        bus.publish(ToolStart(session_id="s1", tool_use_id="toolu_x", name="fs_write", partial=True,
                              input={"path": "a"}))
    assert view.has_card("streaming:toolu_x")
    bus.publish(ToolStart(session_id="s1", call_id="call_1", tool_use_id="toolu_x", name="fs_write",
                          input={"path": "a", "content": "1"}))
    bus.publish(ToolStart(session_id="s1", call_id="call_2", tool_use_id="toolu_x", name="fs_write",
                          input={"path": "a", "content": "2"}))
    assert view.has_card("call_1") and view.has_card("call_2") and not view.has_card("streaming:toolu_x")
    assert view.toPlainText().count("fs_write") == 2  # one card per record, none left streaming
    bus.publish(ToolEnd(session_id="s1", call_id="call_2", name="fs_write", state="FAILED", is_error=True))
    bus.publish(StateChanged(session_id="s1", call_id="call_1", state="EXECUTING", previous="PENDING"))
    text = view.toPlainText()
    assert "failed" in text.lower() and "running" in text
    bridge.detach()
