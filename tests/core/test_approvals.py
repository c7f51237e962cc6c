"""Approvals: calls wait per id, answers come in any order, edits and rules are recorded, approvals
expire, a reopened session offers them again, and an answer for a call that does not wait is refused."""

from __future__ import annotations

import asyncio
import json

import pytest

from desktop_app.core import (
    AgentDeskError,
    Allow,
    ApprovalNotPending,
    ApprovalScope,
    Deny,
    MemoryStore,
    Outcome,
    Rule,
    ToolCallRecord,
    ToolCallState,
)
from desktop_app.core._approvals import SKIPPED_AFTER_DENIAL as SKIPPED
from desktop_app.core._messages import tool_result_block

from .conftest import Harness, call


def error_body(record):
    return json.loads(tool_result_block(record)["content"][0]["text"])


async def test_a_write_asks_and_waits_for_its_own_id(harness):
    w1, w2 = call("write", path="a", content="1"), call("write", path="b", content="2")
    task = asyncio.ensure_future(harness.batch(w1, w2))
    [pending] = await harness.wait_pending()
    assert pending.tool_use_id == w1.id and pending.state is ToolCallState.APPROVAL_REQUIRED
    assert pending.id == harness.rid(w1) and pending.id.startswith("call_")
    assert "permission_required" in harness.types(pending.id)
    with pytest.raises(ApprovalNotPending, match="no tool call"):  # w2 does not wait yet
        harness.executor.decide(w2.id, Allow())
    with pytest.raises(ApprovalNotPending, match="no tool call"):  # the model's id is not the desk's key
        harness.executor.decide(w1.id, Allow())
    harness.executor.decide(pending.id, Allow(by="alice", note="fine"))
    [pending2] = await harness.wait_pending()
    assert pending2.tool_use_id == w2.id and pending2.id != pending.id
    harness.executor.decide(pending2.id, Allow(by="alice"))
    r1, r2 = await task
    assert (r1.state, r2.state) == (ToolCallState.COMPLETED, ToolCallState.COMPLETED)
    assert r1.approval.decided_by == "alice" and r1.approval.note == "fine"
    assert [p.kind for p in r1.provenance] == ["mode", "user"]
    assert [e.state for e in r1.trail] == [
        ToolCallState.PENDING, ToolCallState.APPROVAL_REQUIRED, ToolCallState.APPROVED, ToolCallState.EXECUTING,
        ToolCallState.COMPLETED,
    ]


async def test_parallel_approvals_answer_in_any_order():
    h = Harness(MemoryStore())
    h.policy.add_rule(Rule.parse("echo", "ask", "test"))
    calls = [call("echo", text=str(i)) for i in range(3)]
    task = asyncio.ensure_future(h.batch(*calls))
    pending = await h.wait_pending(3)
    for rec in reversed(pending):
        h.executor.decide(rec.id, Allow())
    records = await task
    assert [r.result["content"][0]["text"] for r in records] == ["0", "1", "2"]


async def test_denial_note_reaches_the_model_and_the_rest_of_the_batch_is_skipped(harness):
    w1, w2, e = call("write", path="a", content="1"), call("write", path="b", content="2"), call("echo", text="x")
    task = asyncio.ensure_future(harness.batch(w1, w2, e))
    await harness.wait_pending()
    harness.executor.decide(harness.rid(w1), Deny(by="bob", note="not that file"))
    r1, r2, r3 = await task
    assert r1.state is ToolCallState.DENIED and r1.outcome is Outcome.USER
    assert "not that file" in error_body(r1)["error"]
    # the others were never offered: skipped, a distinct outcome that names the denial they follow
    for r in (r2, r3):
        assert (r.state, r.outcome) == (ToolCallState.DENIED, Outcome.SKIPPED)
        assert r.trail[-1].note == "skipped after a denial: bob denied write, an earlier call of this batch, " \
            "so this call did not run"
        assert r.trail[-1].data == {"after_denial_of": "write"} and r.approval.decision is None
        assert "bob denied write" in error_body(r)["error"]
    assert "files" not in harness.run.state


async def test_an_edit_before_allowing_is_recorded():
    h = Harness(MemoryStore())
    w = call("write", path="a", content="old")
    task = asyncio.ensure_future(h.batch(w))
    await h.wait_pending()
    h.executor.decide(h.rid(w), Allow(edited_input={"path": "a", "content": "new"}))
    [r] = await task
    assert h.run.state["files"] == {"a": "new"}
    approved = next(e for e in r.trail if e.state is ToolCallState.APPROVED)
    assert approved.data["original_input"] == {"path": "a", "content": "old"}
    assert approved.data["edited_input"] == {"path": "a", "content": "new"}
    assert r.approval.edited_input == {"path": "a", "content": "new"}


async def test_an_invalid_edit_fails_instead_of_running():
    h = Harness(MemoryStore())
    w = call("write", path="a", content="old")
    task = asyncio.ensure_future(h.batch(w))
    await h.wait_pending()
    h.executor.decide(h.rid(w), Allow(edited_input={"path": "a"}))
    [r] = await task
    assert r.state is ToolCallState.FAILED and "field `content`" in error_body(r)["error"]


async def test_approvals_expire():
    h = Harness(MemoryStore(), approval_timeout_s=0.05)
    [r] = await h.batch(call("write", path="a", content="1"))
    assert r.state is ToolCallState.DENIED and r.outcome is Outcome.EXPIRED
    assert r.approval.expires_at is not None
    required = next(e for e in h.events if e.type == "permission_required")
    assert required.payload["expires_at"] == r.approval.expires_at


async def test_allow_for_the_session_adds_a_session_rule():
    h = Harness(MemoryStore())
    first = call("bash_run", command="make test")
    task = asyncio.ensure_future(h.batch(first))
    await h.wait_pending()
    h.executor.decide(h.rid(first), Allow(scope=ApprovalScope.SESSION))
    [r] = await task
    approved = next(e for e in r.trail if e.state is ToolCallState.APPROVED)
    assert approved.data["rule_added"] == "bash_run(make test)"  # make is not in the table: the exact command
    [again] = await h.batch(call("bash_run", command="make test"))
    assert again.state is ToolCallState.COMPLETED and again.provenance[0].source == "session"


async def test_always_allow_calls_the_rule_writer():
    h = Harness(MemoryStore())
    written = []
    h.executor.set_rule_writer(written.append)
    c = call("write", path="src/x.py", content="1")
    task = asyncio.ensure_future(h.batch(c))
    await h.wait_pending()
    h.executor.decide(h.rid(c), Allow(scope=ApprovalScope.ALWAYS, rule="write(src/**)"))
    await task
    assert [r.text for r in written] == ["write(src/**)"]
    [again] = await h.batch(call("write", path="src/y.py", content="2"))
    assert again.state is ToolCallState.COMPLETED


async def test_reopened_session_seals_open_calls_and_reoffers_approvals():
    store = MemoryStore()
    h = Harness(store)
    # a call that was executing when the process died
    w = call("write", path="a", content="1")
    task = asyncio.ensure_future(h.batch(w, call("write", path="b", content="2")))
    await h.wait_pending()
    h.executor.decide(h.rid(w), Allow())
    await h.wait_pending()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # simulate the crash states in the store: one EXECUTING, one APPROVAL_REQUIRED

    executing = ToolCallRecord(name="write", input={"path": "c", "content": "3"}, session_id="s1", id="toolu_exec")
    executing.transition(ToolCallState.EXECUTING, actor="executor")
    store.records[executing.id] = executing
    waiting = ToolCallRecord(name="write", input={"path": "d", "content": "4"}, session_id="s1", id="toolu_wait")
    waiting.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy")
    store.records[waiting.id] = waiting

    h2 = Harness(store)
    report = await h2.executor.seal_open("s1")
    assert [r.id for r in report.sealed] == ["toolu_exec"]
    sealed = report.sealed[0]
    body = error_body(sealed)
    assert sealed.state is ToolCallState.SEALED and body["_autoSealed"] is True and body["ok"] is False
    assert "side effects" in body["error"]
    assert [r.id for r in report.reoffered] == ["toolu_wait"]
    assert [p.id for p in h2.executor.pending()] == ["toolu_wait"]
    resumed = asyncio.ensure_future(h2.executor.resume_approvals(report.reoffered, h2.run))
    await h2.wait_pending(1)
    h2.executor.decide("toolu_wait", Allow())
    [done] = await resumed
    assert done.state is ToolCallState.COMPLETED and h2.run.state["files"] == {"d": "4"}


async def test_an_asking_call_keeps_the_tools_own_risk():
    from desktop_app.core import ToolRegistry, tool

    @tool(risk="high")
    async def shred(path: str) -> str:
        """Destroys a file."""
        return path

    h = Harness(MemoryStore())
    h.executor.registry = ToolRegistry([shred])
    c = call("shred", path="a")
    task = asyncio.ensure_future(h.batch(c))
    [p] = await h.wait_pending()
    assert p.risk == "high"
    required = next(e for e in h.events if e.type == "permission_required")
    assert required.payload["risk"] == "high"
    h.executor.decide(h.rid(c), Deny())
    await task


async def test_after_a_reoffered_call_is_denied_the_others_are_skipped_without_asking():

    store = MemoryStore()
    for cid, path in (("toolu_a", "a"), ("toolu_b", "b")):
        rec = ToolCallRecord(name="write", input={"path": path, "content": "x"}, session_id="s1", id=cid)
        rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy")
        store.records[cid] = rec
    h = Harness(store)
    report = await h.executor.seal_open("s1")
    assert sorted(r.id for r in report.reoffered) == ["toolu_a", "toolu_b"]
    resumed = asyncio.ensure_future(h.executor.resume_approvals(report.reoffered, h.run))
    await h.wait_pending(2)
    h.executor.decide("toolu_a", Deny(note="stop"))
    a, b = await asyncio.wait_for(resumed, 2)  # nobody answered b: it is skipped, not left waiting
    assert (a.state, b.state) == (ToolCallState.DENIED, ToolCallState.DENIED)
    assert (a.outcome, b.outcome) == (Outcome.USER, Outcome.SKIPPED)
    assert a.trail[-1].note == "denied by the user: stop"
    assert SKIPPED in b.trail[-1].note and "the user denied write" in b.trail[-1].note
    assert b.approval.decision is None  # nobody decided it: the skip is not an answer
    assert "files" not in h.run.state


async def test_an_answer_for_a_call_that_does_not_wait_is_refused_and_changes_nothing():
    h = Harness(MemoryStore(), approval_timeout_s=0.05)
    # unknown
    with pytest.raises(ApprovalNotPending):
        h.executor.decide("toolu_nobody", Allow())
    # expired
    [expired] = await h.batch(call("write", path="a", content="1"))
    assert expired.outcome is Outcome.EXPIRED
    with pytest.raises(ApprovalNotPending, match=expired.id):
        h.executor.decide(expired.id, Allow())
    assert expired.state is ToolCallState.DENIED and expired.approval.decision is None
    # answered already
    h2 = Harness(MemoryStore())
    w = call("write", path="b", content="2")
    task = asyncio.ensure_future(h2.batch(w))
    await h2.wait_pending()
    h2.executor.decide(h2.rid(w), Deny(note="no"))
    with pytest.raises(ApprovalNotPending):
        h2.executor.decide(h2.rid(w), Allow())
    [r] = await task
    assert r.state is ToolCallState.DENIED and r.approval.decision == "deny"
    assert issubclass(ApprovalNotPending, AgentDeskError)  # the CLI's one-line error path covers it
