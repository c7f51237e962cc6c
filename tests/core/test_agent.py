"""The agent loop over the local Anthropic-compatible server and the real executor (in-memory store):
steps, tool results, guards, interrupt, queued messages, errors and retry, resume with sealing."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from desktop_app.core import (
    Allow,
    AnthropicModelClient,
    Deny,
    MemoryStore,
    Rule,
    RuleSet,
    SessionSetup,
    ToolCallRecord,
    ToolCallState,
)
from desktop_app.core._agent import system_prompt
from desktop_app.core._messages import StoredMessage
from desktop_app.core._record import AuditEntry
from tests.fakes.anthropic_server import (
    StreamError,
    overloaded,
    reply,
    text,
    tool_use,
)
from tests.kit import FakeSandbox, Rig, assert_history_valid
from tests.kit.agent_rig import STARTED


async def test_a_turn_runs_tools_and_ends_with_done(server) -> None:
    server.add(
        reply(text("Echoing twice."), tool_use("echo", {"text": "one"}, id="toolu_a"),
              tool_use("echo", {"text": "two"}, id="toolu_b")),
        lambda req: reply(text(f"Got: {[r['content'][0]['text'] for r in req.tool_results()]}")),
    )
    rig = Rig(server)
    session = await rig.open(title="t")
    result = await session.send("please echo")
    assert (result.reason, result.steps) == ("end_turn", 2)
    assert result.text == "Got: ['one', 'two']"
    history = await session.history()
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert [b["tool_use_id"] for b in history[2].content] == ["toolu_a", "toolu_b"]
    assert_history_valid(history)
    # the second request carried both results, in order
    second = server.requests[1].body["messages"]
    assert [b["tool_use_id"] for b in second[-1]["content"] if b["type"] == "tool_result"] == ["toolu_a", "toolu_b"]
    assert rig.dones() == [{"session_id": session.session.id, "reason": "end_turn", "message": ""}]
    assert rig.types().index("text_chunk") < rig.types().index("tool:start")
    assert not session.running


async def test_system_prompt_names_workspace_image_and_network(server) -> None:
    server.add(reply(text("hi")))
    rig = Rig(server)
    session = await rig.open()
    await session.send("hello")
    system = server.requests[0].body["system"][0]["text"]
    assert "/workspace" in system and "agent-desk/python:3.12" in system and "no network" in system
    assert system == system_prompt(rig.project, FakeSandbox())


async def test_prompt_caching_marks_are_on_every_request(server) -> None:
    server.add(reply(tool_use("echo", {"text": "x"})), reply(text("done")))
    rig = Rig(server)
    session = await rig.open()
    await session.send("go")
    for req in server.requests:
        body = req.body
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    stored = await session.history()
    assert all("cache_control" not in b for m in stored for b in m.content), "marks are not persisted"


async def test_malformed_input_and_unknown_tool_reach_the_model_and_the_turn_goes_on(server) -> None:
    server.add(
        reply(tool_use("echo", raw_json='{"text": "unterminated', id="toolu_bad"),
              tool_use("ecko", {"text": "x"}, id="toolu_unknown")),
        reply(text("I will fix my call.")),
    )
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("go")
    assert result.reason == "end_turn"
    results = server.requests[1].tool_results()
    bad, unknown = (json.loads(r["content"][0]["text"]) for r in results)
    assert all(r.get("is_error") for r in results)
    assert "not valid JSON" in bad["error"]
    assert "unknown tool 'ecko'" in unknown["error"]
    assert_history_valid(await session.history())


async def test_three_failures_of_the_same_tool_pause_the_turn(server) -> None:
    server.add(*[reply(tool_use("flaky", {"n": i})) for i in range(3)], reply(text("should not be reached")))
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("go")
    assert result.reason == "paused"
    assert "flaky failed 3 times" in result.message
    assert rig.dones()[-1]["reason"] == "paused"
    assert len(server.requests) == 3
    assert_history_valid(await session.history())


async def test_failures_of_different_tools_in_a_row_pause_the_turn_at_the_mistake_limit(server) -> None:
    """Roo's consecutiveMistakeCount: failed calls of any tools count, and a success starts the count again."""
    failing = [tool_use("flaky", {"n": 1}), tool_use("ecko", {"text": "x"}),
               tool_use("echo", raw_json='{"text": '), tool_use("flaky", {"n": 2})]
    server.add(*[reply(c) for c in failing], reply(tool_use("echo", {"text": "fine"})),
               *[reply(c) for c in failing], reply(tool_use("ecko", {"text": "y"})), reply(text("unreached")))
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("go")
    assert result.reason == "paused"
    assert result.message.startswith("5 tool calls failed in a row (flaky, ecko, echo), so the turn is paused")
    assert len(server.requests) == 10  # four failures, a success, then five failures
    assert_history_valid(await session.history())


async def test_the_mistake_limit_is_a_setting_and_zero_turns_it_off(server) -> None:
    failing = [tool_use("ecko" if i % 2 else "flaky", {"n": i}) for i in range(6)]
    server.add(*[reply(c) for c in failing], reply(text("gave up on my own")),
               reply(tool_use("ecko", {"n": 9})), reply(tool_use("flaky", {"n": 9})), reply(text("unreached")))
    rig = Rig(server)
    session = await rig.open(setup=SessionSetup(mistake_limit=0))
    assert (await session.send("go")).reason == "end_turn"
    strict = await rig.open(setup=SessionSetup(mistake_limit=2))
    result = await strict.send("again")
    assert (result.reason, result.message.split(")")[0]) == ("paused", "2 tool calls failed in a row (ecko, flaky")


async def test_three_identical_calls_pause_the_turn(server) -> None:
    server.add(*[reply(tool_use("echo", {"text": "same"})) for _ in range(3)], reply(text("unreached")))
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("go")
    assert result.reason == "paused" and "same echo call 3 times" in result.message


async def test_max_steps_ends_the_turn(server) -> None:
    server.add(*[reply(tool_use("echo", {"text": str(i)})) for i in range(5)])
    rig = Rig(server)
    session = await rig.open(setup=SessionSetup(max_steps=3))
    result = await session.send("go")
    assert (result.reason, result.steps) == ("max_steps", 3)
    assert_history_valid(await session.history())


async def test_denied_call_note_reaches_the_model(server) -> None:
    server.add(reply(tool_use("write", {"path": "a.txt"}, id="toolu_w")), reply(text("ok, I won't")))
    rig = Rig(server, mode="ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("write it"))
    await asyncio.wait_for(rig.asked.wait(), 5)
    rig.executor.decide(rig.record("toolu_w").id, Deny(note="not that file, use b.txt"))
    result = await turn
    assert result.reason == "end_turn"
    assert "not that file, use b.txt" in server.requests[1].last_tool_result_text()


async def test_stop_during_a_tool_cancels_it_and_keeps_history_valid(server) -> None:
    server.add(reply(tool_use("slow", {}, id="toolu_slow")), reply(text("unreached")))
    rig = Rig(server)
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(session._run.state[STARTED].wait(), 5)
    session.stop()
    result = await turn
    assert result.reason == "interrupted"
    record = rig.record("toolu_slow")
    assert (record.state, record.outcome.value) == (ToolCallState.FAILED, "interrupted")
    history = await session.history()
    assert_history_valid(history)
    assert history[-1].role == "user"
    assert len(server.requests) == 1


async def test_stop_during_the_stream_drops_the_partial_answer(server) -> None:
    hold = threading.Event()
    server.add(reply(text("a partial answer that never finishes"), hold=hold))
    rig = Rig(server)
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.to_thread(server.wait_for_requests, 1)
    session.stop()
    result = await asyncio.wait_for(turn, 5)
    hold.set()
    assert result.reason == "interrupted"
    history = await session.history()
    assert [m.role for m in history] == ["user"], "the partial assistant message was dropped"


async def test_a_message_sent_during_a_turn_joins_the_next_step(server) -> None:
    hold = threading.Event()
    server.add(
        reply(tool_use("echo", {"text": "x"}), hold=hold),
        lambda req: reply(text(f"saw: {req.last_user_text()}")),
    )
    rig = Rig(server)
    session = await rig.open()
    first = asyncio.ensure_future(session.send("start"))
    await asyncio.to_thread(server.wait_for_requests, 1)
    second = asyncio.ensure_future(session.send("also do this"))
    await asyncio.sleep(0)
    hold.set()
    r1, r2 = await asyncio.gather(first, second)
    assert r1.text == "saw: also do this" and r2 is not None and r2.reason == "end_turn"
    last_user = server.requests[1].body["messages"][-1]
    types = [b["type"] for b in last_user["content"]]
    assert types == ["tool_result", "text"], "tool results first, then the queued message, in one message"


async def test_overloaded_fails_visibly_then_retry_continues(server) -> None:
    server.add(overloaded(), overloaded(), reply(text("back")))
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("hi")
    assert result.reason == "error" and "overloaded" in result.message.lower()
    assert rig.dones()[-1]["reason"] == "error"
    retries = [e.payload for e in rig.events if e.type == "error" and e.payload["retrying"]]
    assert [r["attempt"] for r in retries] == [1]
    again = await session.retry()
    assert (again.reason, again.text) == ("end_turn", "back")
    assert [m.role for m in await session.history()] == ["user", "assistant"]
    assert server.requests[-1].last_user_text() == "hi"


async def test_api_error_mid_stream_then_retry(server) -> None:
    server.add(StreamError(reply(text("partial partial partial")), after_events=4), reply(text("whole")))
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("hi")
    assert result.reason == "error"
    assert [m.role for m in await session.history()] == ["user"]
    assert (await session.retry()).text == "whole"


async def test_missing_key_is_a_clear_error_before_any_request(server) -> None:
    rig = Rig(server)
    rig.model = AnthropicModelClient(api_key=None, base_url=server.url)
    session = await rig.open()
    result = await session.send("hi")
    assert result.reason == "error" and "No Anthropic API key" in result.message
    assert server.requests == []


async def test_reopen_seals_open_calls_and_the_next_request_carries_them(server) -> None:
    store = MemoryStore()
    rig = Rig(server, store=store)
    session = await rig.open()
    sid = session.session.id
    # What a killed process leaves behind: an assistant tool_use and its record stuck in EXECUTING.
    await store.append_message(StoredMessage(sid, "user", [{"type": "text", "text": "run it"}]))
    await store.append_message(StoredMessage(sid, "assistant", [
        {"type": "tool_use", "id": "toolu_long", "name": "slow", "input": {}}]))
    rec = ToolCallRecord(name="slow", input={}, id="toolu_long", session_id=sid, project_id="p1")
    rec.trail.append(AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, "model"))
    await store.save_transition(rec, rec.trail[-1])
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))

    server.add(lambda req: reply(text(f"sealed? {req.last_tool_result_text()}")))
    rig2 = Rig(server, store=store)
    reopened = await rig2.open(session_id=sid)
    assert store.records["toolu_long"].state is ToolCallState.SEALED
    assert reopened.needs_resume
    result = await reopened.retry()
    body = json.loads(server.requests[-1].last_tool_result_text())
    assert body["_autoSealed"] is True
    assert result.reason == "end_turn"
    assert_history_valid(await reopened.history())


async def test_reopen_reoffers_approvals_and_continues_after_the_decision(server) -> None:
    store = MemoryStore()
    rig = Rig(server, store=store, mode="ask")
    server.add(reply(tool_use("write", {"path": "x"}, id="toolu_ask")))
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("write x"))
    await asyncio.wait_for(rig.asked.wait(), 5)
    turn.cancel()  # the process "dies" while the approval waits
    with pytest.raises(asyncio.CancelledError):
        await turn
    session._turn.cancel()
    asked = rig.record("toolu_ask")
    assert asked.state is ToolCallState.APPROVAL_REQUIRED and asked.id.startswith("call_")

    server.add(lambda req: reply(text(f"result: {req.last_tool_result_text()}")))
    rig2 = Rig(server, store=store, mode="ask")
    reopened = await rig2.open(session_id=session.session.id)
    assert reopened.running and reopened.needs_resume
    assert [r.id for r in rig2.executor.pending()] == [asked.id]
    rig2.executor.decide(asked.id, Allow())
    result = await reopened.wait()
    assert result.reason == "end_turn" and result.text == "result: wrote x"
    assert_history_valid(await reopened.history())


async def test_rules_allow_in_ask_mode(server) -> None:
    server.add(reply(tool_use("write", {"path": "ok.txt"})), reply(text("done")))
    rules = RuleSet([Rule.parse("write(ok.txt)", "allow", "project")])
    rig = Rig(server, mode="ask", rules=rules)
    session = await rig.open()
    assert (await session.send("go")).reason == "end_turn"
