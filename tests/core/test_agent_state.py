"""Agent state and status over the local Anthropic-compatible server and the real executor: the state sequence
of a turn with an approval, status(), plan mode refusing a write then a plan approved and the write running,
ask_user answered and with nobody to answer, todo_changed, tool_executed's approval, error's phase."""

from __future__ import annotations

import asyncio
import json

import pytest

from desktop_app.core import (
    STATUS_CHANNELS,
    AgentState,
    AgentStateChanged,
    Allow,
    Answer,
    Deny,
    Envelope,
    PermissionMode,
    StateChanged,
    ToolCallState,
    status_from_events,
)
from desktop_app.tools import AskUser, ExitPlanMode, TodoWrite
from tests.fakes.anthropic_server import AnthropicServer, overloaded, reply, text, tool_use
from tests.kit import Rig, assert_history_valid


def person_rig(server: AnthropicServer, mode: str) -> Rig:
    rig = Rig(server, mode=mode)
    for t in (AskUser(), ExitPlanMode(), TodoWrite()):
        rig.registry.register(t)
    return rig


def agent_states(rig: Rig) -> list[tuple[str, str]]:
    return [(e.event.state, e.event.reason) for e in rig.events if isinstance(e.event, AgentStateChanged)]


async def wait_for(rig: Rig, type_: str) -> Envelope:
    found: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
    for e in rig.events:
        if e.type == type_ and not found.done():
            found.set_result(e)
    off = rig.bus.on(type_, lambda env: found.done() or found.set_result(env))
    try:
        return await asyncio.wait_for(found, 30)
    finally:
        off()


async def test_a_turn_with_an_approval_goes_ready_working_paused_working_ready(server) -> None:
    server.add(reply(tool_use("write", {"path": "x"}, id="toolu_w")), reply(text("done")))
    rig = Rig(server, mode="ask")
    session = await rig.open()
    assert session.status().state is AgentState.READY
    turn = asyncio.ensure_future(session.send("write x"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    status = session.status()
    assert status.state is AgentState.PAUSED and status.reason == "approval"
    assert [a["name"] for a in status.pending_approvals] == ["write"]
    assert status.cursor == rig.bus.seq and status.steps == 1
    rig.executor.decide(rig.record("toolu_w").id, Allow())
    assert (await turn).reason == "end_turn"
    assert agent_states(rig) == [("WORKING", ""), ("PAUSED", "approval"), ("WORKING", ""), ("READY", "")]
    changes = [e.event for e in rig.events if isinstance(e.event, AgentStateChanged)]
    assert [c.previous for c in changes] == ["READY", "WORKING", "PAUSED", "WORKING"]
    assert all(c.why for c in changes) and changes[-1].steps == 2 and changes[-1].total_steps == 2
    # the per-call events keep their type and class; the agent's are told apart by scope
    calls = [e for e in rig.events if e.type == "state_changed" and e.payload.get("scope") != "agent"]
    assert calls and all(isinstance(e.event, StateChanged) for e in calls)
    after = session.status()
    assert after.state is AgentState.READY and after.pending_approvals == [] and after.last_error is None


async def test_the_status_read_back_from_the_store_matches_the_live_one(server) -> None:
    server.add(reply(tool_use("write", {"path": "x"}, id="toolu_w")))
    rig = Rig(server, mode="ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("write x"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    stored = await rig.store.events_since(0, STATUS_CHANNELS, session_id=session.session.id)
    records = await rig.store.session_records(session.session.id)
    back = status_from_events(session.session.id, stored, records)
    live = session.status()
    assert (back.state, back.reason, back.steps, back.live) == (live.state, live.reason, live.steps, False)
    assert [a["call_id"] for a in back.pending_approvals] == [a["call_id"] for a in live.pending_approvals]
    session.stop()
    await turn
    assert session.status().state is AgentState.STOPPED


async def test_a_model_error_stops_the_agent_and_is_the_last_error_with_its_phase(server) -> None:
    server.add(overloaded(), overloaded())
    rig = Rig(server)
    session = await rig.open()
    result = await session.send("hi")
    assert result.reason == "error"
    status = session.status()
    assert status.state is AgentState.STOPPED
    assert status.last_error is not None and status.last_error["phase"] == "model"
    assert status.last_error["severity"] == "error"
    retries = [e.payload for e in rig.events if e.type == "error" and e.payload["retrying"]]
    assert retries and all(r["phase"] == "model" for r in retries)


async def test_plan_mode_refuses_a_write_then_an_approved_plan_lets_it_run(server) -> None:
    plan = "# Plan\n\n1. write `x`\n2. check it"
    server.add(
        reply(tool_use("write", {"path": "x"}, id="toolu_early")),
        reply(tool_use("echo", {"text": "look"}, id="toolu_read")),
        reply(tool_use("exit_plan_mode", {"plan": plan}, id="toolu_plan")),
        reply(tool_use("write", {"path": "x"}, id="toolu_late")),
        reply(text("done")),
    )
    rig = person_rig(server, "plan")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("plan, then write x"))
    asked = await wait_for(rig, "question_asked")
    assert asked.payload["kind"] == "plan" and asked.payload["text"] == plan
    assert "auto" in asked.payload["modes"] and "plan" not in asked.payload["modes"]
    status = session.status()
    assert (status.state, status.reason) == (AgentState.PAUSED, "plan")
    rig.executor.questions.answer(asked.payload["question_id"], Answer(approved=True, mode="auto"))
    assert (await turn).reason == "end_turn"
    early, late = rig.record("toolu_early"), rig.record("toolu_late")
    assert early.state is ToolCallState.DENIED and "plan mode" in early.error
    assert rig.record("toolu_read").state is ToolCallState.COMPLETED
    assert late.state is ToolCallState.COMPLETED
    assert rig.executor.policy.mode_for(session.session.id) is PermissionMode.AUTO
    assert rig.executor.policy.mode is PermissionMode.PLAN, "only this session left plan mode"
    assert ("PAUSED", "plan") in agent_states(rig)
    assert_history_valid(await session.history())


async def test_a_rejected_plan_sends_the_note_back_and_stays_in_plan_mode(server) -> None:
    server.add(reply(tool_use("exit_plan_mode", {"plan": "rm everything"}, id="toolu_plan")),
               lambda req: reply(text(req.last_tool_result_text())))
    rig = person_rig(server, "plan")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("plan"))
    asked = await wait_for(rig, "question_asked")
    with pytest.raises(Exception, match="not one of the modes"):
        rig.executor.questions.answer(asked.payload["question_id"], Answer(approved=True, mode="plan"))
    rig.executor.questions.answer(asked.payload["question_id"], Answer(approved=False, note="keep the tests"))
    result = await turn
    assert "rejected" in result.text and "keep the tests" in result.text
    assert rig.executor.policy.mode_for(session.session.id) is PermissionMode.PLAN
    answered = await wait_for(rig, "question_answered")
    assert answered.payload["answer"] == "reject" and answered.payload["note"] == "keep the tests"


async def test_a_question_answered_in_the_window_reaches_the_model_and_the_audit(server) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Which db?", "choices": ["sqlite", "postgres"]},
                              id="toolu_q")),
               lambda req: reply(text(req.last_tool_result_text())))
    rig = person_rig(server, "ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("set up the db"))
    asked = await wait_for(rig, "question_asked")
    assert asked.payload["choices"] == ["sqlite", "postgres"]
    [pending] = session.status().pending_questions
    assert pending["text"] == "Which db?" and session.status().reason == "question"
    rig.executor.questions.answer(pending["question_id"], Answer(text="postgres"))
    result = await turn
    assert result.text == "The person answered: postgres"
    record = rig.record("toolu_q")
    assert record.state is ToolCallState.COMPLETED, "ask_user needs no approval in ask mode"
    assert record.input["question"] == "Which db?" and record.result["details"]["answer"] == "postgres"
    assert [s for s, _ in agent_states(rig)] == ["WORKING", "PAUSED", "WORKING", "READY"]


@pytest.mark.parametrize("how", ["strict", "no_person"])
async def test_a_question_with_nobody_to_answer_tells_the_model_at_once(server, how) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Delete the cache?"}, id="toolu_q")),
               lambda req: reply(text(req.last_tool_result_text())))
    rig = person_rig(server, "strict" if how == "strict" else "ask")
    rig.executor.questions.no_person = how == "no_person"
    session = await rig.open()
    result = await asyncio.wait_for(session.send("go"), 30)
    assert "No answer will come" in result.text
    answered = [e.payload for e in rig.events if e.type == "question_answered"]
    assert answered and answered[0]["answered"] is False
    assert "PAUSED" not in [s for s, _ in agent_states(rig)]


async def test_stopping_a_turn_that_waits_for_an_answer_ends_the_wait(server) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Sure?"}, id="toolu_q")))
    rig = person_rig(server, "ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await wait_for(rig, "question_asked")
    session.stop()
    assert (await asyncio.wait_for(turn, 30)).reason == "interrupted"
    assert rig.executor.questions.pending() == []
    assert session.status().state is AgentState.STOPPED


async def test_todo_changed_and_tool_executed_carry_the_list_and_the_approval(server) -> None:
    todos = [{"id": "1", "content": "write tests", "status": "in_progress"}]
    server.add(reply(tool_use("todo_write", {"todos": todos}, id="toolu_t"),
                     tool_use("write", {"path": "y"}, id="toolu_w")),
               reply(text("done")))
    rig = person_rig(server, "ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    rig.executor.decide(rig.record("toolu_w").id, Allow(note="fine", by="ada"))
    await turn
    [changed] = [e.payload for e in rig.events if e.type == "todo_changed"]
    assert changed["todos"] == todos and changed["counts"]["in_progress"] == 1
    executed = {e.payload["name"]: e.payload for e in rig.events if e.type == "tool_executed"}
    assert executed["todo_write"]["approval"]["by"] == "mode"
    assert executed["write"]["approval"] == {"by": "person", "detail": "ada", "decision": "allow", "source": "",
                                             "note": "fine", "edited": False}
    assert executed["write"]["duration_ms"] is not None


async def test_a_denied_call_resumes_work_and_reports_who_denied(server) -> None:
    server.add(reply(tool_use("write", {"path": "x"}, id="toolu_w")), reply(text("ok")))
    rig = Rig(server, mode="ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    rig.executor.decide(rig.record("toolu_w").id, Deny(note="no"))
    await turn
    executed = [e.payload for e in rig.events if e.type == "tool_executed"]
    assert executed[0]["approval"]["decision"] == "deny"
    assert [s for s, _ in agent_states(rig)] == ["WORKING", "PAUSED", "WORKING", "READY"]


def test_an_agent_state_envelope_reads_back_as_its_own_class() -> None:
    env = Envelope(seq=1, channel=AgentStateChanged.channel, type="state_changed", time=0.0,
                   payload={"scope": "agent", "state": "PAUSED", "previous": "WORKING", "why": "w",
                            "reason": "plan", "session_id": "s"})
    assert isinstance(env.event, AgentStateChanged) and env.event.reason == "plan"
    call = Envelope(seq=2, channel=StateChanged.channel, type="state_changed", time=0.0,
                    payload={"call_id": "c", "state": "EXECUTING"})
    assert type(call.event) is StateChanged
    assert json.loads(json.dumps(env.to_dict()))["payload"]["scope"] == "agent"


async def test_a_question_of_a_call_that_is_over_is_not_read_back_as_waiting(server) -> None:
    """The process died while a question waited: the reopened session sealed the call, so `sessions status`
    does not list the question as waiting for ever."""
    server.add(reply(tool_use("ask_user", {"question": "Sure?"}, id="toolu_q")))
    rig = person_rig(server, "ask")
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await wait_for(rig, "question_asked")
    sid = session.session.id
    stored = await rig.store.events_since(0, STATUS_CHANNELS, session_id=sid)
    back = status_from_events(sid, stored, await rig.store.session_records(sid))
    assert [q["text"] for q in back.pending_questions] == ["Sure?"] and back.reason == "question"
    turn.cancel()  # the process "dies"
    session._turn.cancel()
    await asyncio.gather(turn, session._turn, return_exceptions=True)
    await rig.executor.seal_open(sid)
    stored = await rig.store.events_since(0, STATUS_CHANNELS, session_id=sid)
    assert status_from_events(sid, stored, await rig.store.session_records(sid)).pending_questions == []


async def test_a_front_end_that_answers_as_soon_as_it_hears_finds_the_question_waiting(server) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Now?"}, id="toolu_q")),
               lambda req: reply(text(req.last_tool_result_text())))
    rig = person_rig(server, "ask")
    rig.bus.on("question_asked",
               lambda env: rig.executor.questions.answer(env.payload["question_id"], Answer(text="at once")))
    session = await rig.open()
    assert (await session.send("go")).text == "The person answered: at once"
