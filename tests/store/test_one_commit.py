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


async def _turn(store: SqlStore, server, events: list, the_tool=echo) -> AgentSession:
    bus = EventBus(store)
    bus.on("*", events.append)
    executor = Executor(ToolRegistry([the_tool]), PermissionPolicy("auto"), bus=bus, store=store)
    model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=0)
    session = await AgentSession.open(store=store, bus=bus, executor=executor, tools=[the_tool], model_client=model,
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


async def test_the_models_message_rides_with_its_calls_first_states(store_url: str, server, tmp_path: Path):
    """The model's message that asks for calls is durable in the commit of the batch's first write, before it in
    the chain: a step of one call is two commits (the message with the call's PENDING and EXECUTING, then its
    final state with the result), not three. In a parallel batch, the other calls' states come after it."""
    server.add(reply(text("one"), tool_use("echo", {"text": "a"})),
               reply(text("two"), tool_use("echo", {"text": "b"}), tool_use("echo", {"text": "c"})),
               reply(text("done")))
    store = await SqlStore.open(store_url, signer=HeadSigner(os.urandom(32), witness_dir=tmp_path / "witness"))
    try:
        session = await _turn(store, server, [])
        result = await session.send("echo thrice")
        assert result.reason is TurnEnd.END_TURN, result
        await store.flush()
        entries = await _rows(store, "SELECT seq, state, record_id, actor FROM audit_entries ORDER BY seq")
        batches = await _rows(store, "SELECT first_seq, last_seq FROM audit_batches")
        history = [m.role for m in await store.messages(session.session.id)]
        assert (await store.verify()).ok
    finally:
        await store.close()

    def commit_of(seq: int) -> tuple[int, int]:
        return next(b for b in batches if b[0] <= seq <= b[1])

    asked = [e for e in entries if e[1] == "MESSAGE" and e[3] == "assistant"]
    assert len(asked) == 3 and history == ["user", "assistant", "user", "assistant", "user", "assistant"]
    first_states = {}
    for seq, state, rid, _ in entries:
        if rid is not None:
            first_states.setdefault(rid, (seq, state))
    (one,) = [s for s in first_states.values() if asked[0][0] < s[0] < asked[1][0]]
    two = [s for s in first_states.values() if asked[1][0] < s[0] < asked[2][0]]
    # Step 1: the message, then the call's PENDING and EXECUTING, in one commit.
    assert one[1] == "PENDING" and commit_of(asked[0][0]) == commit_of(one[0])
    executing = next(e for e in entries if e[2] is not None and e[1] == "EXECUTING" and e[0] > one[0])
    assert commit_of(executing[0]) == commit_of(asked[0][0])
    # Step 2: both calls' first states come after the message; the first of them shares its commit.
    assert len(two) == 2 and all(s[0] > asked[1][0] for s in two)
    assert commit_of(min(two)[0]) == commit_of(asked[1][0])
    # Step 1 waited on two commits: the message with the call's first states, then its end with the result (the
    # events' own rows, "ROWS", are written behind, awaited by nobody).
    step_one = {commit_of(e[0]) for e in entries if asked[0][0] <= e[0] < asked[1][0] and e[1] != "ROWS"}
    assert len(step_one) == 2


async def test_no_call_runs_before_the_message_that_asked_for_it_is_on_disk(server, tmp_path: Path):
    db = tmp_path / "audit.db"
    seen: list[list] = []

    @tool(read_only=True)
    async def look(text: str) -> str:
        """What the database holds of the model's messages as the call runs."""
        seen.append(raw_sql(db, "SELECT content FROM messages WHERE role = 'assistant'"))
        return text

    server.add(reply(text("one"), tool_use("look", {"text": "a"}), tool_use("look", {"text": "b"})),
               reply(text("done")))
    store = await SqlStore.open(db)
    try:
        session = await _turn(store, server, [], look)
        assert (await session.send("look twice")).reason is TurnEnd.END_TURN
    finally:
        await store.close()
    assert len(seen) == 2
    for rows in seen:  # each call saw the message that asked for both of them
        assert len(rows) == 1 and rows[0][0].count('"tool_use"') == 2


async def test_a_refused_model_message_runs_none_of_its_calls(server, tmp_path: Path):
    db = tmp_path / "audit.db"
    ran: list[str] = []

    @tool(read_only=True)
    async def mark(text: str) -> str:
        """Note that it ran."""
        ran.append(text)
        return text

    server.add(reply(text("one"), tool_use("mark", {"text": "a"}), tool_use("mark", {"text": "b"})),
               reply(text("never asked")))
    store = await SqlStore.open(db)
    events: list = []
    try:
        session = await _turn(store, server, events, mark)
        # The database refuses the model's message that asks for the calls (as a full disk or a constraint would).
        await store._run_in_writer(lambda conn: conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"))
        result = await session.send("mark twice")
        assert (await store.verify()).ok
    finally:
        await store.close()
    assert result.reason is TurnEnd.ERROR and "refused by the test" in result.message
    assert ran == [] and len(server.requests) == 1
    assert raw_sql(db, "SELECT count(*) FROM tool_calls") == [(0,)]  # all or nothing: not even PENDING
    ends = [e.payload for e in events if e.type == "tool:end"]
    assert len(ends) == 2 and {e["summary"] for e in ends} == {"not recorded"}
