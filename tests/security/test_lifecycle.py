"""Attacks on the desk's lifecycle: a secret pasted into a first prompt (it becomes the title and is stored
before any runtime exists), damaged or forged marks of the process that has a session open, and a live
session another process runs."""

from __future__ import annotations

import asyncio

import pytest

from desktop_app.app import _key_source
from desktop_app.config import Settings
from desktop_app.core import EventBus, ProjectInfo, SessionInfo, ToolCallRecord, ToolCallState
from desktop_app.runtime import OPEN_IN, process_alive, seal_abandoned, this_process
from desktop_app.store import SqlStore

CUSTOM_KEY = "corp-gw-7f3a9c1e5b2d4f60a8e1"  # a gateway's key: no pattern knows it, only the literal does


@pytest.fixture
def store(tmp_path):
    s = asyncio.run(SqlStore.open(tmp_path / "a.db"))
    yield s
    asyncio.run(s.close())


def test_the_configured_key_is_redacted_from_a_message_stored_before_any_runtime(tmp_path, monkeypatch):
    """app.py teaches the bus's redactor the configured key at start-up, so the controller's early store
    of a first prompt (and the title made from it) never holds it, whatever its shape."""
    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = Settings(path=None, api_key=CUSTOM_KEY)
    bus = EventBus(None)
    assert _key_source(settings, bus) == "settings"
    redacted = bus.redactor.redact(f"use {CUSTOM_KEY} and sk-ant-api03-{'Z' * 40} to deploy")
    assert CUSTOM_KEY not in redacted and "sk-ant-api03" not in redacted
    from desktop_app.ui._controller import title_from

    assert CUSTOM_KEY not in title_from(redacted)


@pytest.mark.parametrize("mark", [
    None, {}, {"pid": "1"}, {"pid": -5}, {"pid": 2**40}, {"pid": True}, {"pid": 1.5},
    {"started": "yesterday"}, {"pid": None}, "a string", [1, 2],
])
def test_a_damaged_or_forged_mark_never_stops_the_start_nor_hides_a_dead_call(store, mark):
    here = this_process()
    meta_mark = {**here, **mark} if isinstance(mark, dict) and mark else mark
    assert process_alive(meta_mark) is False
    asyncio.run(_seal_one(store, {OPEN_IN: meta_mark}))


async def _seal_one(store, meta):
    await store.save_project(ProjectInfo("prj_x", "x", "/tmp"))
    await store.save_session(SessionInfo("ses_x", "prj_x", meta=meta))
    rec = ToolCallRecord(name="bash_run", input={"command": "make"}, id="call_x", session_id="ses_x",
                         project_id="prj_x")
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))
    sealed = await seal_abandoned(store, await EventBus.open(store))
    assert list(sealed) == ["ses_x"]
    assert (await store.get_record("call_x")).state is ToolCallState.SEALED


def test_the_start_time_is_what_tells_a_reused_pid(store):
    """A pid the OS gave to another process since (same pid, another start) does not keep a dead session's
    calls "running"; this very process, with its own start time, does."""
    me = this_process()
    assert process_alive(me) is True
    assert process_alive({**me, "started": me["started"] - 3600}) is False
    assert process_alive({**me, "host": "another-machine"}) is None  # cannot be told: left alone
