"""The approval card in the real main window at 1024x700 and 1920x1080: diff first, every part readable without
dragging a splitter (the inbox takes its column when calls wait), with screenshots saved as test artifacts."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from desktop_app.ui import MainWindow
from desktop_app.ui.demo import SAMPLE_EDIT, SAMPLE_EDIT_DIFF
from desktop_app.ui.inbox import PendingApproval

REASON = "fs_edit can change things and mode ask asks first"


def _pending() -> list[PendingApproval]:
    return [
        PendingApproval("c1", "ses_1", "bash_run", {"command": "git commit -am 'Fix price parsing'"},
                        risk="medium", reason="bash_run can change things and mode ask asks first"),
        PendingApproval("c2", "ses_1", "fs_edit", dict(SAMPLE_EDIT), risk="medium", reason=REASON,
                        meta={"diff": SAMPLE_EDIT_DIFF}, preview=SAMPLE_EDIT_DIFF),
        PendingApproval("c3", "ses_2", "fs_write", {"path": "README.md", "content": "# Shop\n"}, risk="low",
                        reason="fs_write can change things and mode ask asks first"),
    ]


def _shown(window: MainWindow, text: str) -> bool:
    """Whether `text` of the card lies inside the card's viewport as it is scrolled now."""
    card = window.inbox.card
    found = card.document().find(text)
    if found.isNull():
        return False
    rect = card.cursorRect(found)
    return card.viewport().rect().contains(rect)


@pytest.mark.parametrize("size", [(1024, 700), (1920, 1080)], ids=["1024x700", "1920x1080"])
def test_the_card_reads_whole_at_both_sizes(qtbot, qloop, tmp_path, size):
    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    # the conversation keeps at least half the width; the inbox's column is what is left
    qtbot.waitUntil(lambda: window.centralWidget().width() >= window.width() // 2)
    for item in _pending():
        window.inbox.add(item)
    window.inbox.list.setCurrentIndex(window.inbox.model.index(1))
    qtbot.waitUntil(lambda: window.inbox.height() >= 0.5 * window.height())  # the inbox took its column
    QApplication.processEvents()
    card = window.inbox.card
    text = card.toPlainText()
    # in order: what will happen (the diff), the risk and why, then the raw input, folded
    assert text.index("Changes src/shop/prices.py") < text.index("+    return Decimal(cleaned).quantize")
    assert text.index("+    return Decimal") < text.index("Why it asks") < text.index("Raw input and provenance")
    assert '"old_string"' not in text
    # readable: the header and the whole change in view, no line cut sideways, the answer within reach
    for part in ("fs_edit", "Changes src/shop/prices.py", "-    cleaned = text.replace", "+    return Decimal"):
        assert _shown(window, part), part
    assert not card.horizontalScrollBar().isVisible()
    assert card.height() >= 0.35 * window.height()
    list_view = window.inbox.list
    assert list_view.visualRect(list_view.currentIndex()).height() <= list_view.viewport().height()
    for w in (window.inbox.note, window.inbox.allow_btn, window.inbox.deny_btn):
        assert w.isVisible() and window.rect().contains(w.mapTo(window, w.rect().bottomRight()))
    if size[1] >= 1000:  # the large window shows the whole card without scrolling
        assert _shown(window, "Why it asks") and _shown(window, "Raw input and provenance")
    else:  # the small one reaches the rest by scrolling the card, never by a splitter
        card.verticalScrollBar().setValue(card.verticalScrollBar().maximum())
        QApplication.processEvents()
        assert _shown(window, "Why it asks") and _shown(window, "Raw input and provenance")
        card.verticalScrollBar().setValue(0)
    path = tmp_path / f"approval-card-{size[0]}x{size[1]}.png"
    assert window.grab().save(str(path))
    print(f"screenshot artifact: {path}")


def test_a_disclosure_unfolds_the_raw_input_and_the_provenance(qtbot, qloop):
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    item = _pending()[1]
    item.provenance = [{"kind": "mode", "detail": "ask", "source": "project", "decision": "ask"}]
    window.inbox.add(item)
    assert '"old_string"' not in window.inbox.card.toPlainText()
    window.inbox.toggle_raw()
    text = window.inbox.card.toPlainText()
    assert '"old_string"' in text and "ask by mode: ask (project)" in text
    window.inbox.toggle_raw()
    assert '"old_string"' not in window.inbox.card.toPlainText()
