"""The timeline's details pane shows the call's risk, and why it asked, in the inbox's words."""

from __future__ import annotations

from desktop_app.core import Approval, Risk, ToolCallRecord
from desktop_app.ui.timeline._details import render_call_details
from desktop_app.ui.timeline._model import TimelineRow


def test_details_show_the_risk_and_why_it_asked() -> None:
    rec = ToolCallRecord(name="bash_run", input={"command": "rm -rf /workspace/*"}, id="c1", risk=Risk.HIGH,
                         approval=Approval(required=True, meta={"reason": "deletes everything in /workspace"}))
    html = render_call_details(TimelineRow.from_record(rec))
    assert "Risk <b style='color:" in html and ">high</b>" in html
    assert "it asked because <b>deletes everything in /workspace</b>" in html
    quiet = ToolCallRecord(name="bash_run", input={"command": "ls"}, id="c2", risk=Risk.LOW)
    assert ">low</b></p>" in render_call_details(TimelineRow.from_record(quiet))
