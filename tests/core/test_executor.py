"""The executor pipeline: every path of DESIGN.md's 'life of one tool call', on the in-memory store."""

from __future__ import annotations

import asyncio
import json
import time

from desktop_app.core import MemoryStore, Outcome, StoreError, TextBlock, ToolCall, ToolCallState, ToolResult, tool
from desktop_app.core._messages import tool_result_block

from .conftest import Harness, call


def error_body(record):
    return json.loads(tool_result_block(record)["content"][0]["text"])


async def test_read_only_call_runs_and_completes(harness):
    [r] = await harness.batch(call("echo", text="hi"))
    assert r.state is ToolCallState.COMPLETED and r.outcome is Outcome.OK
    expected = {"type": "tool_result", "tool_use_id": r.tool_use_id, "content": [{"type": "text", "text": "hi"}]}
    assert tool_result_block(r) == expected
    assert [e.state for e in r.trail] == [ToolCallState.PENDING, ToolCallState.EXECUTING, ToolCallState.COMPLETED]
    assert harness.types(r.id)[:2] == ["tool:start", "state_changed"]
    assert harness.types(r.id)[-2:] == ["tool:end", "tool_executed"]
    stored = harness.store.records[r.id]
    assert stored.state is ToolCallState.COMPLETED


async def test_unknown_tool_fails_with_recommendations(harness):
    [r] = await harness.batch(call("ecko", text="x"))
    assert r.state is ToolCallState.FAILED and r.outcome is Outcome.ERROR
    body = error_body(r)
    assert body["ok"] is False and "unknown tool 'ecko'" in body["error"]
    assert any("echo" in rec for rec in body["recommendations"])


async def test_schema_failure_names_the_field(harness):
    [r] = await harness.batch(call("echo", txt="x"))
    body = error_body(r)
    assert r.state is ToolCallState.FAILED
    assert "field `text`" in body["error"] and "Field required" in body["error"]
    assert "field `txt`" in body["error"]  # extra fields are refused too


async def test_malformed_json_input_is_an_error_for_the_model(harness):
    [r] = await harness.batch(ToolCall(id="t1", name="echo", input=None, raw_input='{"text": ', parse_error="EOF"))
    assert r.state is ToolCallState.FAILED and "not valid JSON" in error_body(r)["error"]
    assert r.trail[0].data["raw_input"] == '{"text": '


async def test_a_tool_that_raises_becomes_an_error_result(harness):
    [r] = await harness.batch(call("boom"))
    body = error_body(r)
    assert r.state is ToolCallState.FAILED and r.outcome is Outcome.ERROR
    assert "RuntimeError: kaboom" in body["error"] and body["recommendations"]


async def test_a_tool_that_reports_an_error_is_recorded_with_its_words_not_its_body(harness):
    """The model gets the desk's whole error body (message and advice); the record's `error`, and the end event's
    reason that the card, the CLI and the history show, is the message in words, not the JSON around it."""

    @tool(read_only=True)
    async def locked(path: str) -> ToolResult:
        """Refuses, as a file tool does."""
        return ToolResult.error(f"{path}: the file is locked", ["wait for the other writer"], path=path)

    @tool(read_only=True)
    async def plain() -> ToolResult:
        """An error in the tool's own words (an MCP server's), kept as it is."""
        return ToolResult(content=[TextBlock('{"ok": false, "error": ""}'), TextBlock("no body")], is_error=True)

    harness.registry.register(locked)
    harness.registry.register(plain)
    r, q = await harness.batch(call("locked", path="a.txt"), call("plain"))
    assert r.state is ToolCallState.FAILED and r.error == "a.txt: the file is locked"
    assert error_body(r) == {"ok": False, "error": "a.txt: the file is locked",
                             "recommendations": ["wait for the other writer"]}  # the model's, unchanged
    [end] = [e for e in harness.events if e.type == "tool:end" and e.payload["call_id"] == r.id]
    assert end.payload["reason"] == "a.txt: the file is locked"
    assert q.error == '{"ok": false, "error": ""}\nno body'  # not the desk's body: the text as it came


async def test_a_tool_that_hangs_times_out(harness):
    t0 = time.monotonic()
    [r] = await harness.batch(call("hang"))
    assert r.state is ToolCallState.FAILED and r.outcome is Outcome.TIMEOUT
    assert "timed out" in error_body(r)["error"]
    assert time.monotonic() - t0 < 2


async def test_streamed_updates_are_published(harness):
    [r] = await harness.batch(call("chatty"))
    texts = [e.payload["text"] for e in harness.events if e.type == "tool:update"]
    assert texts == ["one\n", "two\n"] and r.state is ToolCallState.COMPLETED


async def test_read_only_calls_run_in_parallel_and_keep_order(harness):
    calls = [call("nap", ms=100) for _ in range(8)]
    t0 = time.monotonic()
    records = await harness.batch(*calls)
    elapsed = time.monotonic() - t0
    assert [r.tool_use_id for r in records] == [c.id for c in calls]
    assert len({r.id for r in records}) == len(calls)
    assert all(r.state is ToolCallState.COMPLETED for r in records)
    assert elapsed < 0.45  # 8 x 100 ms at 4 at a time is ~200 ms, never 800


async def test_a_write_is_a_barrier(harness):
    harness.policy.mode = harness.policy.mode.__class__("auto")
    starts = {}

    def on_state(e):
        if e.payload["state"] == "EXECUTING":
            starts.setdefault(e.payload["call_id"], time.monotonic())

    harness.bus.on("state_changed", on_state)
    ends = {}
    harness.bus.on("tool:end", lambda e: ends.setdefault(e.payload["call_id"], time.monotonic()))
    a, b = call("nap", ms=50), call("nap", ms=50)
    w = call("write", path="f", content="x")
    c = call("nap", ms=50)
    ra, rb, rw, rc = records = await harness.batch(a, b, w, c)
    assert [r.state for r in records] == [ToolCallState.COMPLETED] * 4
    assert starts[rw.id] >= max(ends[ra.id], ends[rb.id])
    assert starts[rc.id] >= ends[rw.id]


async def test_policy_denial():
    h = Harness(MemoryStore(), mode="read-only")
    [r] = await h.batch(call("write", path="a", content="1"))
    assert r.state is ToolCallState.DENIED and r.outcome is Outcome.POLICY
    assert "read-only" in error_body(r)["error"]
    assert r.provenance[0].kind == "mode"


async def test_abort_cancels_running_and_waiting_calls(harness):
    harness.policy.mode = harness.policy.mode.__class__("auto")
    slow = call("nap", ms=5000)
    task = asyncio.ensure_future(harness.batch(slow))
    await harness.wait_for(lambda: "EXECUTING" in [e.payload.get("state") for e in harness.events])
    harness.run.abort.set()
    [r] = await asyncio.wait_for(task, 2)
    assert r.state is ToolCallState.FAILED and r.outcome is Outcome.INTERRUPTED


async def test_a_store_that_refuses_fails_the_call_visibly_and_keeps_what_was_written():
    store = MemoryStore()
    h = Harness(store, mode="auto")
    [ok] = await h.batch(call("echo", text="kept"))
    c = call("write", path="a", content="1")

    original = store.save_transition
    count = {"n": 0}

    async def flaky(record, entry):
        count["n"] += 1
        if count["n"] == 2:  # PENDING is written, EXECUTING is refused
            raise StoreError("database is locked")
        await original(record, entry)

    store.save_transition = flaky
    [r] = await h.batch(c)
    assert r.state is ToolCallState.FAILED and r.is_error
    assert "audit store" in error_body(r)["error"] and "locked" in error_body(r)["error"]
    assert "files" not in h.run.state  # it never ran
    assert store.records[ok.id].state is ToolCallState.COMPLETED
    assert any(e.type == "tool:error" and e.payload["call_id"] == r.id for e in h.events)


