"""A long session reopens at its end: the last calls' cards (each paired with its own record), one link for
the earlier ones, every call in the timeline, and the tokens as stored."""

from __future__ import annotations

from PySide6.QtCore import QUrl

from benchmarks.bench_ui import _long_session
from desktop_app.core import EventBus
from desktop_app.ui import AppController, MainWindow
from desktop_app.ui._conversation import SHOWN_CARDS
from tests.ui.fake_desk import FakeDesk


def test_a_long_session_shows_its_tail_and_the_rest_on_request(qtbot, run, store):
    calls = 700
    sid = run(_long_session(store, calls), timeout=120_000)
    bus = run(EventBus.open(store))
    window = MainWindow()
    qtbot.addWidget(window)
    controller = AppController(window, FakeDesk(store=store, bus=bus))
    run(controller.start(check_docker=False))
    assert controller.current_session == sid
    conv = window.conversation
    assert window.timeline_model.rowCount() == calls
    shown = [f"call_{i:05d}" for i in range(calls) if conv.has_card(f"call_{i:05d}")]
    assert shown == [f"call_{i:05d}" for i in range(calls - SHOWN_CARDS, calls)]  # the tail, in order
    text = conv.toPlainText()
    assert text.startswith("⤒ Show 79 earlier messages (400 tool calls)\nAssistant\nStep 40.")
    # the durations, as stored, and each call's output under its card
    assert text.rstrip().endswith("make target699  done · 20 ms\nbuilt 699")
    assert window.status.usage.text() == "70,000 in · 3,500 out · $0.2100"

    conv.anchorClicked.emit(QUrl("earlier:"))  # the link: now everything (4 x 300 > 700)
    assert all(conv.has_card(f"call_{i:05d}") for i in range(calls))
    assert "earlier messages" not in conv.toPlainText()
    assert "make target0  done · 20 ms" in conv.toPlainText()
    run(controller.close())
