"""The inbox's list model under Qt's model tester, and its items built from stored records."""

from __future__ import annotations

import time

from desktop_app.core import ToolCallRecord, ToolCallState
from desktop_app.ui.inbox import InboxModel, PendingApproval


def test_inbox_model_passes_the_model_tester(qtmodeltester):
    model = InboxModel()
    for i in range(5):
        model.add(PendingApproval(f"c{i}", "ses", "bash_run", {"command": "ls"}, expires_at=time.time() + 60))
    qtmodeltester.check(model)
    assert model.remove("c2") is not None
    assert model.rowCount() == 4
    assert not model.add(PendingApproval("c1", "ses", "bash_run", {}))  # no duplicates
    qtmodeltester.check(model)


def test_inbox_item_from_a_stored_record_keeps_risk_reason_and_expiry():
    rec = ToolCallRecord(name="fs_write", input={"path": "a.txt", "content": "x"}, session_id="s", risk="high")
    rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy")
    rec.approval.meta = {"reason": "fs_write can change things and mode ask asks first"}
    rec.approval.expires_at = time.time() + 30
    item = PendingApproval.from_record(rec)
    assert item.risk == "high"
    assert item.why == "fs_write can change things and mode ask asks first"
    assert 0 < item.remaining_s() <= 30
