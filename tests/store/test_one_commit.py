"""A step's last call and its tool-result message are durable in one commit (one wait on the writer, not
two), on SQLite and PostgreSQL with a signed chain: both in the same signed batch, nothing heard of the call
before both are on disk, and a refused write leaves neither (the turn stops, the call unrecorded)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqlalchemy import text as sql

from desktop_app.core import (
    AgentSession,
    AnthropicModelClient,
    EventBus,
    Executor,
    PermissionPolicy,
    ProjectInfo,
    ToolRegistry,
    TurnEnd,
    tool,
)
from desktop_app.store import HeadSigner, SqlStore
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.kit import raw_sql


@tool(read_only=True)
async def echo(text: str) -> str:
    """Return the text."""
    return text


async def _turn(store: SqlStore, server, events: list) -> AgentSession:
    bus = EventBus(store)
    bus.on("*", events.append)
    executor = Executor(ToolRegistry([echo]), PermissionPolicy("auto"), bus=bus, store=store)
    model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=0)
    session = await AgentSession.open(store=store, bus=bus, executor=executor, tools=[echo], model_client=model,
                                      project=ProjectInfo(id="p1", name="demo", path="/tmp/demo"), sandbox=None)
    return session


def _rows(store: SqlStore, query: str):
    return store._read(lambda conn: [tuple(r) for r in conn.execute(sql(query))])


async def test_the_last_calls_state_and_its_result_are_one_signed_commit(store_url: str, server, tmp_path: Path):
    server.add(reply(text("one"), tool_use("echo", {"text": "a"})),
               reply(text("two"), tool_use("echo", {"text": "b"}), tool_use("echo", {"text": "c"})),
               reply(text("done")))
    store = await SqlStore.open(store_url, signer=HeadSigner(os.urandom(32), witness_dir=tmp_path / "witness"))
    events: list = []
    try:
        session = await _turn(store, server, events)
        result = await session.send("echo thrice")
        assert result.reason is TurnEnd.END_TURN, result
        await store.flush()  # the turn's last events too: verify reads a store at rest (its witness is written after)
        entries = await _rows(store, "SELECT seq, state, record_id, actor FROM audit_entries ORDER BY seq")
        batches = await _rows(store, "SELECT first_seq, last_seq FROM audit_batches")
        messages = await _rows(store, "SELECT role, content FROM messages ORDER BY id")
        assert (await store.verify()).ok
    finally:
        await store.close()

    def commit_of(seq: int) -> tuple[int, int]:
        return next(b for b in batches if b[0] <= seq <= b[1])

    finals = [e for e in entries if e[1] == "COMPLETED"]
    results = [e for e in entries if e[1] == "MESSAGE" and e[3] == "user"][1:]  # after the person's message
    assert len(finals) == 3 and len(results) == 2
    # Step 1 (one call): its COMPLETED and the result message share a commit, the state first in the chain.
    assert commit_of(finals[0][0]) == commit_of(results[0][0]) and finals[0][0] < results[0][0]
    # Step 2 (two calls in parallel): the one that ended last rides with the message, the other one was
    # committed (and heard of) as it ended.
    riding = [f for f in finals[1:] if commit_of(f[0]) == commit_of(results[1][0])]
    assert len(riding) == 1 and riding[0][0] < results[1][0]
    told = [b["tool_use_id"] for role, content in messages if role == "user"
            for b in (json.loads(content) if isinstance(content, str) else content) if b.get("type") == "tool_result"]
    assert len(told) == 3
    # Each call's end was published once, after its state (the bus numbers events in publishing order).
    ends = [e for e in events if e.type == "tool:end"]
    assert [e.payload["state"] for e in ends] == ["COMPLETED"] * 3


async def test_nothing_is_heard_of_the_last_call_before_its_state_and_result_are_on_disk(server, tmp_path: Path):
    db = tmp_path / "audit.db"
    server.add(reply(text("one"), tool_use("echo", {"text": "a"})), reply(text("done")))
    store = await SqlStore.open(db)
    seen: list[tuple[list, list]] = []

    def on_disk(env) -> None:  # on the loop, as the event is published: what a reader finds then
        seen.append((raw_sql(db, "SELECT state FROM tool_calls"),
                     raw_sql(db, "SELECT content FROM messages WHERE content LIKE '%tool_result%'")))

    try:
        session = await _turn(store, server, [])
        session.bus.on("tool:end", on_disk)
        assert (await session.send("echo it")).reason is TurnEnd.END_TURN
    finally:
        await store.close()
    assert len(seen) == 1
    states, results = seen[0]
    assert states == [("COMPLETED",)] and len(results) == 1


async def test_a_refused_result_message_leaves_neither_it_nor_the_calls_state(server, tmp_path: Path):
    db = tmp_path / "audit.db"
    server.add(reply(text("one"), tool_use("echo", {"text": "a"})), reply(text("never asked")))
    store = await SqlStore.open(db)
    events: list = []
    try:
        session = await _turn(store, server, events)
        # The database refuses the tool-result message (a trigger, as a full disk or a constraint would).
        await store._run_in_writer(lambda conn: conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.content LIKE '%tool_result%' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"))
        result = await session.send("echo it")
    finally:
        await store.close()
    assert result.reason is TurnEnd.ERROR and "refused by the test" in result.message
    assert len(server.requests) == 1  # the model never heard the result
    assert raw_sql(db, "SELECT state FROM tool_calls") == [("EXECUTING",)]  # all or nothing: no COMPLETED
    assert raw_sql(db, "SELECT count(*) FROM messages WHERE content LIKE '%tool_result%'") == [(0,)]
    ends = [e.payload for e in events if e.type == "tool:end"]
    assert len(ends) == 1 and ends[0]["summary"] == "not recorded"
    assert not [e for e in events if e.type == "state_changed" and e.payload.get("state") == "COMPLETED"]
