"""Breakpoints on the real executor and agent loop (loopback Anthropic server): a tool, a group and the next
write stop the session before the call (PAUSED, reason breakpoint), the person's word goes on or stops it, a
breakpoint never lets through what the mode denies, the one-shot is spent, children stop too, bad specs are
refused clearly."""

from __future__ import annotations

import asyncio

import pytest

from desktop_app.core import AgentStateChanged, Allow, ConfigError, Deny, ToolCallState
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.kit import Rig, assert_history_valid


def pauses(rig: Rig) -> list[tuple[str, str]]:
    return [(e.event.reason, e.event.why) for e in rig.events
            if isinstance(e.event, AgentStateChanged) and e.event.state == "PAUSED"]


async def test_a_tool_breakpoint_pauses_before_the_call_and_the_persons_allow_goes_on(server) -> None:
    server.add(reply(tool_use("echo", {"text": "a"}, id="toolu_1")), reply(tool_use("write", {"path": "x"},
                                                                                   id="toolu_2")),
               reply(text("done")))
    rig = Rig(server, mode="auto")  # nothing would ask: only the breakpoint does
    session = await rig.open()
    assert [b.on for b in session.set_breakpoints(["echo"])] == ["echo"]
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    rec = rig.record("toolu_1")
    assert rec.state is ToolCallState.APPROVAL_REQUIRED
    assert rec.approval.meta["reason"] == "breakpoint: before echo; allow to go on"
    assert session.status().reason == "breakpoint"
    rig.executor.decide(rec.id, Allow(by="ada"))
    assert (await turn).reason == "end_turn"
    assert pauses(rig) == [("breakpoint", "at a breakpoint before echo")]
    assert rig.record("toolu_2").state is ToolCallState.COMPLETED  # write is not echo: it ran unasked
    assert_history_valid(await session.history())


async def test_the_next_write_is_a_one_shot_and_a_deny_stops_the_call(server) -> None:
    server.add(reply(tool_use("echo", {"text": "r"}, id="toolu_r")), reply(tool_use("write", {"path": "x"},
                                                                                   id="toolu_w1")),
               reply(tool_use("write", {"path": "y"}, id="toolu_w2")), reply(text("done")))
    rig = Rig(server, mode="auto")
    session = await rig.open()
    session.set_breakpoints(["@write"])  # the next call that may write
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    first = rig.record("toolu_w1")
    assert "the next call that may write" in first.approval.meta["reason"]
    rig.executor.decide(first.id, Deny(by="ada", note="not yet"))
    assert (await turn).reason == "end_turn"
    assert rig.record("toolu_r").state is ToolCallState.COMPLETED  # a read goes by
    assert rig.record("toolu_w1").state is ToolCallState.DENIED
    assert rig.record("toolu_w2").state is ToolCallState.COMPLETED
    assert session._run.breakpoints == []


async def test_a_group_breakpoint_never_lets_through_what_the_mode_denies(server) -> None:
    server.add(reply(tool_use("write", {"path": "x"}, id="toolu_w")), reply(text("done")))
    rig = Rig(server, mode="read-only")
    session = await rig.open()
    session.set_breakpoints(["group:custom"])
    assert (await session.send("go")).reason == "end_turn"
    assert rig.record("toolu_w").state is ToolCallState.DENIED and not rig.asked.is_set()


@pytest.mark.parametrize("spec", ["", "bash run", "group:", "rm -rf /", "@wr1te"])
async def test_a_spec_that_is_not_a_breakpoint_is_refused_clearly(server, spec: str) -> None:
    session = await Rig(server).open()
    with pytest.raises(ConfigError, match="is not a breakpoint") as caught:
        session.set_breakpoints(["echo", spec])
    assert "@write" in caught.value.hint and session._run.breakpoints == []


async def test_a_breakpoint_at_approval_stops_only_the_calls_that_ask(server) -> None:
    """@approval (the window's "when a call needs approval"): a call something asks about pauses the session as at
    a breakpoint, with the breakpoint as its reason beside the policy's; a call nothing asks about runs."""
    server.add(reply(tool_use("echo", {"text": "r"}, id="toolu_r")), reply(tool_use("write", {"path": "x"},
                                                                                   id="toolu_w")),
               reply(text("done")))
    rig = Rig(server, mode="ask")  # writes ask, reads do not
    session = await rig.open()
    assert [b.on for b in session.set_breakpoints(["@approval"])] == ["@approval"]
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    rec = rig.record("toolu_w")
    assert "breakpoint: before write (a call that needs approval)" in rec.approval.meta["reason"]
    assert rec.approval.meta["breakpoint"] == "@approval" and session.status().reason == "breakpoint"
    rig.executor.decide(rec.id, Allow(by="ada"))
    assert (await turn).reason == "end_turn"
    assert rig.record("toolu_r").state is ToolCallState.COMPLETED is rig.record("toolu_w").state
    assert pauses(rig) == [("breakpoint", "at a breakpoint before write")]
    assert [b.on for b in session.breakpoints()] == ["@approval"]  # not a one-shot
