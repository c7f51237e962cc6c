"""The timeline's details pane shows the call's risk, and why it asked, in the inbox's words; a skipped call
with no risk; an edited call with both inputs."""

from __future__ import annotations

from desktop_app.core import Approval, AuditEntry, Outcome, Risk, ToolCallRecord, ToolCallState
from desktop_app.ui.timeline._details import render_call_details
from desktop_app.ui.timeline._model import TimelineRow
from tests.ui.helpers import shown_words


def test_details_show_the_risk_and_why_it_asked() -> None:
    rec = ToolCallRecord(name="bash_run", input={"command": "rm -rf /workspace/*"}, id="c1", risk=Risk.HIGH,
                         approval=Approval(required=True, meta={"reason": "deletes everything in /workspace"}))
    html = render_call_details(TimelineRow.from_record(rec))
    assert "Risk <b style='color:" in html and ">high</b>" in html
    assert "it asked because <b>deletes everything in /workspace</b>" in html
    quiet = ToolCallRecord(name="bash_run", input={"command": "ls"}, id="c2", risk=Risk.LOW)
    assert ">low</b></p>" in render_call_details(TimelineRow.from_record(quiet))


def test_a_skipped_call_shows_no_risk_and_the_denial_it_follows() -> None:
    rec = ToolCallRecord(name="fs_read", input={"path": "a"}, id="c3", risk=Risk.MEDIUM)
    rec.transition(ToolCallState.DENIED, actor="executor", outcome=Outcome.SKIPPED,
                   note="skipped after a denial: the user denied fs_write, an earlier call of this batch, so this "
                        "call did not run", data={"after_denial_of": "fs_write"})
    html = render_call_details(TimelineRow.from_record(rec))
    assert "skipped after your denial of fs_write: it was not judged, offered or run." in html
    assert "Risk" not in html and "medium" not in html
    assert shown_words(rec) == {"skipped"}


def test_an_edited_call_shows_what_ran_beside_the_model_s_input() -> None:
    rec = ToolCallRecord(name="bash_run", input={"command": "ls narwhal"}, id="c4")
    rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy")
    rec.trail.append(AuditEntry(rec.id, rec.state, 0.0, "user", "input edited; judged again before it runs",
                                {"original_input": {"command": "ls zebrafish"},
                                 "edited_input": {"command": "ls narwhal"}}))
    html = render_call_details(TimelineRow.from_record(rec))
    assert html.index("Input, as the person edited it (what ran)") < html.index("ls narwhal") \
        < html.index("The model's input") < html.index("ls zebrafish")


def test_the_calls_connections_are_shown_under_it() -> None:
    from desktop_app.core import NetworkConnection

    rec = ToolCallRecord(name="bash_run", input={"command": "pip install foo"}, id="c5")
    rec.transition(ToolCallState.EXECUTING, actor="executor")
    ok = NetworkConnection("pypi.org", 443, 100.0, "allowed", "listed", "151.101.0.223", 812, 53_000, 100.25,
                           attribution="the one call executing")
    no = NetworkConnection("evil.example", 443, 101.0, "refused", "not listed (strict mode)")
    for conn in (ok, no):
        rec.trail.append(AuditEntry(rec.id, rec.state, conn.started_at, "network", conn.summary(),
                                    {"network": conn.to_dict()}))
    html = render_call_details(TimelineRow.from_record(rec), rec=rec)
    assert "<h4>Network</h4>" in html and "<b>pypi.org:443</b>" in html and "812 B up, 53,000 B down" in html
    assert "+250 ms" in html and "the one call executing" in html
    assert "<b>evil.example:443</b>" in html and "not listed (strict mode)" in html
