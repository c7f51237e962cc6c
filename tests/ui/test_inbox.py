"""The approval inbox dock: cards, decisions, keyboard, batch, always-allow preview, edit-then-allow."""

from __future__ import annotations

import asyncio
import time

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QApplication

from desktop_app.ui._inbox import ApprovalInbox, EditInputDialog, PendingApproval, RulePreviewDialog


def _item(i: int, name: str = "bash_run", **kw) -> PendingApproval:
    data = {"command": f"npm test --shard {i}"} if name == "bash_run" else {"path": f"src/f{i}.py",
                                                                          "content": "x"}
    return PendingApproval(f"c{i}", "ses_1", name, data, risk="medium", reason="mode ask asks", **kw)


def _inbox(qtbot) -> tuple[ApprovalInbox, list]:
    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    inbox.show()
    decisions: list = []
    inbox.decided.connect(decisions.append)
    return inbox, decisions


def test_badge_counts_and_card_shows_command_risk_and_why(qtbot, qloop):
    inbox, _ = _inbox(qtbot)
    assert inbox.windowTitle() == "Approvals"
    with qtbot.waitSignal(inbox.arrived):
        inbox.add(_item(1))
    inbox.add(_item(2, expires_at=time.time() + 90))
    assert inbox.windowTitle() == "Approvals (2)"
    card = inbox.card.toPlainText()
    assert "$ npm test --shard 1" in card and "medium risk" in card and "mode ask asks" in card
    inbox.list.setCurrentIndex(inbox.model.index(1))
    assert "Expires in" in inbox.card.toPlainText()
    inbox.remove("c1")
    assert inbox.windowTitle() == "Approvals (1)"


def test_ctrl_enter_allows_and_ctrl_backspace_denies_with_the_note(qtbot, qloop):
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1))
    inbox.activateWindow()
    qtbot.waitUntil(inbox.isActiveWindow)  # shortcuts only fire in the active window
    inbox.list.setFocus()
    qtbot.keyClick(inbox.list, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert [(d.call_id, d.allow, d.scope) for d in decisions] == [("c1", True, "once")]
    inbox.note.setText("use the test runner instead")
    qtbot.keyClick(inbox.note, Qt.Key.Key_Backspace, Qt.KeyboardModifier.ControlModifier)
    assert decisions[-1].allow is False and decisions[-1].note == "use the test runner instead"


def test_batch_allow_of_selected_cards(qtbot, qloop):
    inbox, decisions = _inbox(qtbot)
    for i in range(4):
        inbox.add(_item(i))
    sel = inbox.list.selectionModel()
    for r in (0, 2, 3):
        sel.select(inbox.model.index(r), QItemSelectionModel.SelectionFlag.Select)
    assert inbox.allow_btn.text() == "Allow 3 selected"
    qtbot.mouseClick(inbox.allow_btn, Qt.MouseButton.LeftButton)
    assert sorted(d.call_id for d in decisions) == ["c0", "c2", "c3"]
    inbox.allow_for_session()
    assert decisions[-1].scope == "session"


def test_always_allow_previews_the_rule_before_deciding(qtbot, run):
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1))
    task = asyncio.ensure_future(inbox.always_allow())
    qtbot.waitUntil(lambda: isinstance(QApplication.activeModalWidget(), RulePreviewDialog)
                    or any(isinstance(w, RulePreviewDialog) and w.isVisible() for w in QApplication.topLevelWidgets()))
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, RulePreviewDialog) and w.isVisible())
    assert dlg.edit.text() == "bash_run(npm test *)"  # core's narrow suggestion
    assert not decisions  # nothing decided while the preview is open
    dlg.edit.setText("bash_run(npm test --shard *)")
    dlg.accept()
    assert run(task) == "bash_run(npm test --shard *)"
    assert decisions[-1].scope == "always" and decisions[-1].rule == "bash_run(npm test --shard *)"


def test_edit_then_allow_refuses_bad_json_and_sends_the_edit(qtbot, run):
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1, "fs_write"))
    task = asyncio.ensure_future(inbox.edit_then_allow())
    qtbot.waitUntil(lambda: any(isinstance(w, EditInputDialog) and w.isVisible()
                                for w in QApplication.topLevelWidgets()))
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, EditInputDialog) and w.isVisible())
    dlg.edit.setPlainText("{not json")
    dlg._check()
    assert dlg.isVisible() and "Not valid JSON" in dlg.error.text()
    dlg.edit.setPlainText('{"path": "src/other.py", "content": "y"}')
    dlg._check()
    assert run(task) == {"path": "src/other.py", "content": "y"}
    assert decisions[-1].edited_input == {"path": "src/other.py", "content": "y"} and decisions[-1].allow


def test_diff_preview_is_fetched_for_file_writes(qtbot, qloop):
    inbox, _ = _inbox(qtbot)
    asked: list[str] = []

    async def preview(item):
        asked.append(item.call_id)
        return "--- a/src/f1.py\n+++ b/src/f1.py\n@@ -1 +1 @@\n-old\n+x\n"

    inbox.preview_provider = preview
    inbox.add(_item(1, "fs_write"))
    qtbot.waitUntil(lambda: "+x" in inbox.card.toPlainText())
    assert asked == ["c1"]
    assert "Diff preview" in inbox.card.toPlainText()
