"""Opening, migrations, connection settings, the RecordStore protocol and round trips."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from desktop_app.core import (
    Approval,
    AuditEntry,
    Channel,
    Envelope,
    EventBus,
    Outcome,
    PermissionRequired,
    ProjectInfo,
    Provenance,
    RecordStore,
    SessionInfo,
    StoredMessage,
    StoreError,
    TextChunk,
    ToolCallState,
    ToolEnd,
)
from desktop_app.store import SCHEMA_VERSION, SqlStore
from desktop_app.store._tables import STORE_TABLES
from desktop_app.store.integrity._chain import GENESIS

from .conftest import make_record, pending, run_to_completion


async def test_open_creates_file_and_migrates(db_path: Path) -> None:
    """About SQLite itself: the file and its folder are made, WAL is on."""
    assert not db_path.parent.exists()
    store = await SqlStore.open(db_path)
    await store.close()
    con = sqlite3.connect(db_path)
    assert con.execute("SELECT version_num FROM alembic_version").fetchone() == (SCHEMA_VERSION,)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(STORE_TABLES) | {"tool_calls_fts"} <= tables
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()
    # Opening again is a no-op migration and keeps the data.
    store = await SqlStore.open(f"sqlite:///{db_path}")
    assert (await store.stats()).records == 0
    await store.close()


async def test_every_connection_gets_the_pragmas(sqlite_store: SqlStore) -> None:
    """About SQLite itself: its PRAGMAs on every connection."""
    store = sqlite_store

    def pragmas(conn):
        return tuple(conn.exec_driver_sql(f"PRAGMA {p}").scalar()
                     for p in ("journal_mode", "busy_timeout", "foreign_keys", "synchronous"))

    assert await store._run_in_writer(pragmas) == ("wal", 5000, 1, 1)  # synchronous NORMAL == 1
    assert await store._read(pragmas) == ("wal", 5000, 1, 1)


async def test_in_memory_sqlite_is_refused() -> None:
    with pytest.raises(StoreError, match="database file"):
        await SqlStore.open("sqlite://")


async def test_implements_record_store_protocol(store: SqlStore) -> None:
    assert isinstance(store, RecordStore)
    for name, member in inspect.getmembers(RecordStore, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(SqlStore, name)
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(member), name
        want = [(p.name, p.kind) for p in inspect.signature(member).parameters.values()]
        got = [(p.name, p.kind) for p in inspect.signature(ours).parameters.values()]
        assert got == want, name


async def _digests(store: SqlStore) -> dict[int, str]:
    return await store._read(lambda c: dict(c.execute(text("SELECT seq, digests FROM audit_entries")).all()))


async def test_transition_round_trip_and_hash(store: SqlStore) -> None:
    rec = make_record("fs_write", path="/workspace/a.txt", content="héllo")
    rec.provenance = [Provenance(kind="rule", detail="Write(/workspace/**)", source="project", decision="ask")]
    rec.sandbox = {"kind": "docker", "image": "agent-desk/minimal:latest"}
    rec.risk = "medium"
    first = pending(rec)
    await store.save_transition(rec, first)
    assert first.seq == 1
    digests = await _digests(store)
    # Each entry carries the digests of its record's row and fields, and its hash covers them.
    assert digests[1].startswith("row:") and " input:" in digests[1] and " provenance:" in digests[1]
    canon = json.dumps({**first.to_dict(), "seq": 1, "digests": digests[1], "message_id": None},
                       sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert first.hash == hashlib.sha256((GENESIS + canon).encode()).hexdigest()

    e2 = rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy", note="rule asks", data={"rule": 1})
    await store.save_transition(rec, e2)
    rec.approval = Approval(required=True, decision="allow", decided_by="me", decided_at=12.5, note="fine")
    e3 = rec.transition(ToolCallState.APPROVED, actor="user:me")
    await store.save_transition(rec, e3)
    assert (e2.seq, e3.seq) == (2, 3)
    digests = await _digests(store)
    canon3 = json.dumps({**e3.to_dict(), "seq": 3, "digests": digests[3], "message_id": None},
                        sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert e3.hash == hashlib.sha256((e2.hash + canon3).encode()).hexdigest()

    got = await store.get_record(rec.id)
    assert got is not None
    assert got.to_dict() == rec.to_dict()
    assert [(e.state, e.seq, e.hash, e.actor, e.note, e.data) for e in got.trail] == [
        (e.state, e.seq, e.hash, e.actor, e.note, e.data) for e in rec.trail
    ]
    assert await store.get_trail(rec.id) == got.trail
    assert await store.get_record("call_missing") is None


async def test_entry_for_another_record_is_refused(store: SqlStore) -> None:
    a, b = make_record(), make_record()
    with pytest.raises(StoreError, match="cannot be saved with record"):
        await store.save_transition(a, pending(b))


async def test_concurrent_callers_share_transactions_and_one_chain(store: SqlStore) -> None:
    records = [make_record(command=f"echo {i}") for i in range(200)]
    entries = [pending(r) for r in records]
    await asyncio.gather(*(store.save_transition(r, e) for r, e in zip(records, entries, strict=True)))
    assert sorted(e.seq for e in entries) == list(range(1, 201))
    assert store._writer.batches < 200  # group commit: several callers per transaction
    assert (await store.verify()).ok


async def test_writes_do_not_block_the_event_loop(tmp_path: Path) -> None:
    """About SQLite itself: its file lock held by another connection (tests/store/test_db_errors.py locks
    PostgreSQL)."""
    store = await SqlStore.open(tmp_path / "a.db", busy_timeout_ms=3000)
    other = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the writer will wait for this lock
    rec = make_record()
    save = asyncio.create_task(store.save_transition(rec, pending(rec)))
    ticks = 0
    for _ in range(20):
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 20 and not save.done()
    other.execute("ROLLBACK")
    await save
    other.close()
    assert (await store.get_record(rec.id)) is not None
    await store.close()


async def test_events_are_written_in_order_and_replayed(store: SqlStore) -> None:
    bus = await EventBus.open(store)
    assert bus.seq == 0
    bus.publish(TextChunk(session_id="s1", text="hi"))
    bus.publish(PermissionRequired(session_id="s1", call_id="c1", name="bash", input={"command": "rm x"}))
    bus.publish(ToolEnd(session_id="s2", call_id="c2", name="bash", state="COMPLETED"))
    await store.flush()
    assert await store.last_event_seq() == 3
    all_ = await store.events_since(0, list(Channel))
    assert [e.seq for e in all_] == [1, 2, 3]
    assert isinstance(all_[1].event, PermissionRequired) and all_[1].event.input == {"command": "rm x"}
    assert [e.seq for e in await store.events_since(1, [Channel.PROGRESS])] == [3]
    assert [e.seq for e in await store.events_since(0, list(Channel), upto=2)] == [1, 2]
    assert [e.seq for e in await store.events_since(0, list(Channel), session_id="s2")] == [3]

    replay = bus.subscribe([Channel.CONTROL], since=0)
    first = await anext(replay)
    assert first.type == "permission_required" and first.seq == 2
    await replay.aclose()
    # A bus opened later continues the numbering from the store.
    assert (await EventBus.open(store)).seq == 3


async def test_last_event_seq_sees_queued_events(store: SqlStore) -> None:
    for seq in range(1, 51):
        store.append_event(Envelope(seq, Channel.MONITOR, "error", 1.0, {"message": str(seq)}))
    assert await store.last_event_seq() == 50


async def test_projects_sessions_messages(store: SqlStore) -> None:
    p = ProjectInfo(id="prj_1", name="demo", path="/home/me/demo", settings={"network": False})
    await store.save_project(p)
    p.name = "renamed"
    await store.save_project(p)
    assert await store.get_project("prj_1") == p
    assert [x.id for x in await store.list_projects()] == ["prj_1"]
    assert await store.get_project("nope") is None

    s1 = SessionInfo(id="ses_1", project_id="prj_1", title="one", created_at=1.0, updated_at=1.0)
    s2 = SessionInfo(id="ses_2", project_id="prj_1", title="two", created_at=2.0, updated_at=5.0,
                     meta={"k": [1, 2]})
    await store.save_session(s1)
    await store.save_session(s2)
    assert await store.get_session("ses_2") == s2
    assert [s.id for s in await store.list_sessions("prj_1")] == ["ses_2", "ses_1"]
    assert await store.list_sessions("other") == []

    m1 = StoredMessage("ses_1", "user", [{"type": "text", "text": "hello"}])
    m2 = StoredMessage("ses_1", "assistant", [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}])
    assert await store.append_message(m1) == m1.id
    await store.append_message(m2)
    assert m2.id is not None and m2.id > m1.id
    assert await store.messages("ses_1") == [m1, m2]
    assert await store.messages("ses_2") == []


async def test_bad_write_fails_alone_with_a_clear_error(store: SqlStore) -> None:
    orphan = SessionInfo(id="ses_x", project_id="prj_missing")
    rec = make_record()
    results = await asyncio.gather(
        store.save_session(orphan), store.save_transition(rec, pending(rec)), return_exceptions=True
    )
    assert isinstance(results[0], StoreError)
    assert "prj_missing" in str(results[0]) and "saved first" in str(results[0])
    assert results[1] is None
    assert await store.get_record(rec.id) is not None
    assert (await store.verify()).ok


async def test_a_seq_another_bus_already_used_loses_no_event(store: SqlStore) -> None:
    # Two processes' buses count from where each started: the store numbers events in its transaction.
    store.append_event(Envelope(1, Channel.MONITOR, "error", 1.0, {}))
    store.append_event(Envelope(1, Channel.MONITOR, "error", 2.0, {}))
    store.append_event(Envelope(2, Channel.MONITOR, "error", 3.0, {}))
    await store.flush()
    got = await store.events_since(0, [Channel.MONITOR])
    assert [(e.seq, e.time) for e in got] == [(1, 1.0), (2, 2.0), (3, 3.0)]


async def test_lost_events_are_reported_once_at_flush(tmp_path) -> None:
    """About SQLite itself: its file lock past the busy timeout."""
    import sqlite3

    db = tmp_path / "audit.db"
    store = await SqlStore.open(db, busy_timeout_ms=100)
    try:
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another writer holds the file past the busy timeout
        store.append_event(Envelope(1, Channel.MONITOR, "error", 1.0, {}))
        with pytest.raises(StoreError, match="1 event"):
            await store.flush()
        other.execute("ROLLBACK")
        other.close()
        await store.flush()  # reported once
        assert await store.events_since(0, [Channel.MONITOR]) == []
    finally:
        await store.close()


async def test_session_records_and_states(store: SqlStore) -> None:
    a = await run_to_completion(store, make_record(command="a", created_at=10.0))
    b = make_record(command="b", created_at=20.0)
    await store.save_transition(b, pending(b))
    await store.save_transition(b, b.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy"))
    other = make_record(session_id="ses_2")
    await store.save_transition(other, pending(other))
    got = await store.session_records("ses_1")
    assert [r.id for r in got] == [a.id, b.id]
    assert [len(r.trail) for r in got] == [3, 2]
    open_ = await store.session_records("ses_1", [ToolCallState.APPROVAL_REQUIRED, ToolCallState.EXECUTING])
    assert [r.id for r in open_] == [b.id]
    assert [r.id for r in await store.pending_approvals()] == [b.id]


async def test_closed_store_refuses_work(store_url: str) -> None:
    store = await SqlStore.open(store_url)
    rec = make_record()
    await store.save_transition(rec, pending(rec))
    store.append_event(Envelope(1, Channel.PROGRESS, "text_chunk", 1.0, {"text": "x"}))
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
    with pytest.raises(StoreError, match="closed"):
        store.append_event(Envelope(2, Channel.PROGRESS, "text_chunk", 1.0, {}))
    # close() drained the queue: the event made it to disk.
    engine = create_engine(store_url)
    with engine.connect() as con:
        assert con.execute(text("SELECT count(*) FROM events")).scalar() == 1
    engine.dispose()


async def test_audit_entry_with_unusual_data_still_verifies(store: SqlStore) -> None:
    rec = make_record()
    entry = AuditEntry(rec.id, ToolCallState.PENDING, 5, "engine", data={2: "b", 10: "a", "path": Path("/x")})
    await store.save_transition(rec, entry)
    assert (await store.verify()).ok


async def test_a_calls_identity_is_its_first_saves_and_a_record_that_changes_it_fails_verification(store):
    """The writer updates a call's state, never its identity (session, project, tool, tool_use id, made at):
    a record that changed one between saves (a bug; the executor makes a record once) is not stored as if it
    had always been so, and verification names the call."""
    rec = make_record(session_id="ses_a", project_id="prj_a")
    rec.tool_use_id = "toolu_a"
    await store.save_transition(rec, pending(rec))
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
    assert (await store.get_record(rec.id)).state is ToolCallState.EXECUTING
    rec.session_id, rec.project_id, rec.tool_use_id = "ses_b", "prj_b", "toolu_b"
    await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="engine", outcome=Outcome.OK))
    got = await store.get_record(rec.id)
    assert got.state is ToolCallState.COMPLETED  # the state moved
    assert (got.session_id, got.project_id, got.tool_use_id) == ("ses_a", "prj_a", "toolu_a")
    result = await store.verify()
    assert not result.ok and result.record_id == rec.id, result
