"""A sub-agent's approval in the inbox: its card is marked with the sub-agent's name and template, labelled
with the parent's session, and the answer names the child's session (the controller routes it)."""

from __future__ import annotations

from desktop_app.core import PermissionRequired, SessionInfo
from desktop_app.ui.inbox import ApprovalInbox
from desktop_app.ui.inbox._card import render_card
from desktop_app.ui.inbox._items import PendingApproval


def event(**meta) -> PermissionRequired:
    return PermissionRequired(session_id="ses_child", call_id="call_c", name="bash_run",
                              input={"command": "touch x"}, risk="medium", reason="mode ask asks first", meta=meta)


def test_a_sub_agents_card_names_it(qtbot) -> None:
    inbox = ApprovalInbox()
    qtbot.addWidget(inbox)
    parent = SessionInfo("ses_parent", "prj", "Fix the parser")
    inbox._session = {"ses_parent": parent}.get
    inbox._on_required(event(subagent="builder <b>", template="coding", parent_session_id="ses_parent",
                             parent_call_id="call_task", task="Parse <i>all</i>"))
    item = inbox.model.item(0)
    assert item.title == "⤷ builder <b> · Run command" and item.session_title == "Fix the parser"
    html = render_card(item)
    assert "sub-agent <b>builder &lt;b&gt;</b> (template coding), task: <i>Parse &lt;i&gt;all&lt;/i&gt;</i>" in html
    seen = []
    inbox.decided.connect(lambda cid, sid, d: seen.append((cid, sid)))
    inbox.allow_selected()
    assert seen == [("call_c", "ses_child")]


def test_a_sessions_own_card_is_unmarked() -> None:
    item = PendingApproval.from_event(event())
    assert item.subagent == "" and item.title == "Run command" and "sub-agent" not in render_card(item)
