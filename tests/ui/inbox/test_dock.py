"""The approval inbox dock: cards, decisions (core's Allow | Deny), keyboard, batch, always-allow preview,
edit-then-allow, and its own subscription to the bridge."""

from __future__ import annotations

import asyncio
import time

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QApplication

from desktop_app.core import (
    Allow,
    ApprovalScope,
    Deny,
    EventBus,
    MemoryStore,
    PermissionDecided,
    PermissionRequired,
    SessionInfo,
    StateChanged,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui.dialogs import EditInputDialog, RulePreviewDialog
from desktop_app.ui.inbox import ApprovalInbox, PendingApproval
from desktop_app.ui.inbox._delegate import InboxCardDelegate


def _item(i: int, name: str = "bash_run", **kw) -> PendingApproval:
    data = {"command": f"npm test --shard {i}"} if name == "bash_run" else {"path": f"src/f{i}.py",
                                                                          "content": "x"}
    return PendingApproval(f"c{i}", "ses_1", name, data, risk="medium", reason="mode ask asks", **kw)


def _inbox(qtbot) -> tuple[ApprovalInbox, list]:
    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    inbox.show()
    decisions: list = []  # (call id, session id, Allow | Deny)
    inbox.decided.connect(lambda cid, sid, d: decisions.append((cid, sid, d)))
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
    inbox.add(_item(2))
    inbox.activateWindow()
    qtbot.waitUntil(inbox.isActiveWindow)  # shortcuts only fire in the active window
    inbox.list.setFocus()
    qtbot.keyClick(inbox.list, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert decisions == [("c1", "ses_1", Allow(ApprovalScope.ONCE))]
    assert decisions[0][2].scope == "once"
    inbox.remove("c1")
    inbox.note.setText("use the test runner instead")
    inbox.list.setFocus()
    qtbot.keyClick(inbox.list, Qt.Key.Key_Backspace, Qt.KeyboardModifier.ControlModifier)
    assert decisions[-1] == ("c2", "ses_1", Deny(note="use the test runner instead"))


def test_shortcuts_never_fire_inside_the_note_field(qtbot, qloop):
    """Ctrl+Backspace in the note deletes a word (it once denied the call); Ctrl+Enter there decides nothing."""
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1))
    inbox.activateWindow()
    qtbot.waitUntil(inbox.isActiveWindow)
    inbox.note.setFocus()
    qtbot.keyClicks(inbox.note, "yes but run the linter too")
    qtbot.keyClick(inbox.note, Qt.Key.Key_Backspace, Qt.KeyboardModifier.ControlModifier)
    assert inbox.note.text() == "yes but run the linter "
    for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
        qtbot.keyClick(inbox.note, key, Qt.KeyboardModifier.ControlModifier)
    ctrl_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(inbox.note, Qt.Key.Key_Backspace, ctrl_shift)
    assert decisions == [] and inbox.model.rowCount() == 1


def test_allow_with_a_note_sends_the_note(qtbot, qloop):
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1))
    inbox.add(_item(2))
    inbox.note.setText("  yes, but only this shard  ")
    inbox.allow_selected()
    assert decisions[-1][2] == Allow(ApprovalScope.ONCE, note="yes, but only this shard")
    assert inbox.note.text() == ""  # a note goes with one decision, not the next
    inbox.note.setText("fine for this session")
    inbox.allow_for_session()
    assert decisions[-1][2] == Allow(ApprovalScope.SESSION, note="fine for this session")


def test_batch_allow_of_selected_cards(qtbot, qloop):
    inbox, decisions = _inbox(qtbot)
    for i in range(4):
        inbox.add(_item(i))
    sel = inbox.list.selectionModel()
    for r in (0, 2, 3):
        sel.select(inbox.model.index(r), QItemSelectionModel.SelectionFlag.Select)
    assert inbox.allow_btn.text() == "Allow 3 selected  [A]"
    qtbot.mouseClick(inbox.allow_btn, Qt.MouseButton.LeftButton)
    assert sorted(cid for cid, _, _ in decisions) == ["c0", "c2", "c3"]
    inbox.allow_for_session()
    assert decisions[-1][2].scope == "session"


def test_always_allow_previews_the_rule_before_deciding(qtbot, run):
    inbox, decisions = _inbox(qtbot)
    inbox.add(_item(1))
    task = asyncio.ensure_future(inbox.always_allow())
    qtbot.waitUntil(lambda: isinstance(QApplication.activeModalWidget(), RulePreviewDialog)
                    or any(isinstance(w, RulePreviewDialog) and w.isVisible() for w in QApplication.topLevelWidgets()))
    dlg = next(w for w in QApplication.topLevelWidgets() if isinstance(w, RulePreviewDialog) and w.isVisible())
    assert dlg.edit.text() == "bash_run(npm test --shard 1)"  # core's suggestion: npm is not in the table, so exact
    assert not decisions  # nothing decided while the preview is open
    dlg.edit.setText("bash_run(npm test --shard *)")
    dlg.accept()
    assert run(task) == "bash_run(npm test --shard *)"
    assert decisions[-1][2] == Allow(ApprovalScope.ALWAYS, rule="bash_run(npm test --shard *)")


def test_edit_then_allow_refuses_bad_json_and_sends_the_edit(qtbot, run):
    inbox, decisions = _inbox(qtbot)
    inbox.add(PendingApproval("c1", "ses_1", "mcp__notes__append", {"path": "src/f1.py", "content": "x"}))
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
    decision = decisions[-1][2]
    assert decision.edited_input == {"path": "src/other.py", "content": "y"} and isinstance(decision, Allow)


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
    card = inbox.card.toPlainText()
    assert card.index("Changes src/f1.py") < card.index("+x") < card.index("Why it asks")


def test_attach_adds_cards_from_every_session_and_drops_them_when_answered(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    inbox, _ = _inbox(qtbot)
    sessions = {"ses_a": SessionInfo("ses_a", "prj_1", "Fix the parser")}
    inbox.attach(bridge, sessions.get)
    with qtbot.waitSignal(inbox.arrived):
        bus.publish(PermissionRequired(session_id="ses_a", call_id="c1", name="bash_run",
                                       input={"command": "make"}, risk="high", reason="mode ask asks"))
    bus.publish(PermissionRequired(session_id="ses_unknown_42", call_id="c2", name="fs_write",
                                   input={"path": "a.txt", "content": "x"}))
    assert [i.call_id for i in inbox.model.items()] == ["c1", "c2"]
    first, second = inbox.model.items()
    assert (first.project_id, first.session_title, first.risk) == ("prj_1", "Fix the parser", "high")
    assert second.session_title == "known_42"  # no such session: the end of its id
    bus.publish(PermissionDecided(session_id="ses_a", call_id="c1", decision="allow"))
    assert [i.call_id for i in inbox.model.items()] == ["c2"]
    bus.publish(StateChanged(session_id="ses_unknown_42", call_id="c2", state="DENIED",
                             previous="APPROVAL_REQUIRED"))  # answered elsewhere, or expired
    assert inbox.model.rowCount() == 0 and inbox.windowTitle() == "Approvals"
    bridge.detach()


LONG = "npm test -- --watch=false " + " ".join(f"--shard-{i}" for i in range(60)) + " ; touch /workspace/.pwned"


def test_a_long_command_is_shown_whole_with_its_risk_and_reason(qtbot, qloop, tmp_path):
    inbox, _ = _inbox(qtbot)
    inbox.resize(420, 600)
    inbox.add(PendingApproval("c1", "ses_1", "bash_run", {"command": LONG + "\r\x1b[2Kls\u202e"}, risk="high",
                              reason="deletes everything in /workspace"))
    card = inbox.card.toPlainText()
    assert "; touch /workspace/.pwned" in card and f"$ {LONG}" in card
    assert "Risk high: it asks because deletes everything in /workspace" in card
    # Characters that would hide what follows them are written as escapes, not dropped.
    assert "\\r\\x1b[2Kls\\u202e" in card and "\r" not in card and "\u202e" not in card
    # The painted card keeps one line: it is cut, and says so with "…".
    fm = inbox.list.fontMetrics()
    line = InboxCardDelegate.input_line(inbox.model.item(0), fm, 300)
    assert line.endswith("…") and line.startswith("npm test") and fm.horizontalAdvance(line) <= 300
    inbox.grab().save(str(tmp_path / "inbox.png"))


def test_other_inputs_are_shown_whole(qtbot, qloop):
    inbox, _ = _inbox(qtbot)
    content = "x = 1\n" * 2000  # 12 000 characters: more than the 4000 the card once kept
    inbox.add(PendingApproval("c1", "ses_1", "fs_write", {"path": "src/a.py", "content": content}, risk="medium"))
    assert inbox.card.toPlainText().count("x = 1") == 0  # folded: the diff comes first
    inbox.toggle_raw()
    assert inbox.card.toPlainText().count("x = 1") == 2000


def test_a_call_offered_again_replaces_its_card(qtbot, qloop):
    inbox, _ = _inbox(qtbot)
    inbox.add(_item(1))
    edited = PendingApproval("c1", "ses_1", "bash_run", {"command": "rm -rf /workspace/*"}, risk="high",
                             reason="deletes everything in /workspace")
    inbox.add(edited)
    assert inbox.model.rowCount() == 1 and inbox.model.item(0) is edited
    assert "rm -rf /workspace/*" in inbox.card.toPlainText() and "Risk high" in inbox.card.toPlainText()
