"""The rows the window reads back (`events`, `sessions`, `projects`) are bound into the chain: rewriting,
moving, adding or deleting one fails `audit verify` (exit 1) with the row named, on SQLite and PostgreSQL; rows
stored before binding existed (a database migrated from 0006) are named as not bound, never as good."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from desktop_app import cli
from desktop_app.core import Channel, Envelope, ProjectInfo, SessionInfo, StoredMessage
from desktop_app.runtime import open_store
from desktop_app.store import SqlStore
from desktop_app.store._migrate import upgrade
from tests.kit import raw_sql
from tests.store.conftest import make_record, run_to_completion


def _env(seq: int, type_: str, text_: str, session: str = "ses_1") -> Envelope:
    return Envelope(seq=seq, channel=Channel.CONTROL, type=type_, time=time.time(), session_id=session,
                    payload={"type": type_, "source": "hooks", "message": text_})


async def _fill(url: str, *, signed: bool = False) -> None:
    """A project, two sessions, six notices, a message and a call; `signed`: by this installation's key (the CLI
    verifies with it)."""
    store = await (open_store(url) if signed else SqlStore.open(url))
    try:
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p", settings={"git_commit": False}))
        await store.save_session(SessionInfo("ses_1", "prj_1", title="fix the tests"))
        await store.save_session(SessionInfo("ses_2", "prj_1", title="other"))
        for i in range(1, 6):
            store.append_event(_env(i, "error", f"notice {i}"))
        await store.append_message(StoredMessage("ses_1", "user", [{"type": "text", "text": "hi"}]))
        await run_to_completion(store, make_record(command="echo hi", session_id="ses_1"))
        store.append_event(_env(6, "error", "notice 6", "ses_2"))
        await store.flush()
    finally:
        await store.close()


async def _verify(url: str):
    store = await SqlStore.open(url)
    try:
        return await store.verify()
    finally:
        await store.close()


ATTACKS = {  # what the attacker runs, and what verify must name
    "event-payload": ("UPDATE events SET payload = '{\"type\":\"error\",\"source\":\"hooks\",\"message\":\"all "
                      "good\"}' WHERE seq = 2", "event 2 (error, session ses_1) was rewritten"),
    "event-type": ("UPDATE events SET type = 'done' WHERE seq = 3", "event 3 (done, session ses_1) was rewritten"),
    "event-moved": ("UPDATE events SET session_id = 'ses_2' WHERE seq = 4", "event 4 (error, session ses_2) was "
                    "rewritten"),
    "event-time": ("UPDATE events SET time = time + 1 WHERE seq = 1", "event 1 (error, session ses_1) was rewritten"),
    "event-deleted": ("DELETE FROM events WHERE seq = 5", "event 5 is in the audit chain but its row in events was "
                      "deleted"),
    "event-added": ("INSERT INTO events (seq, channel, type, time, session_id, payload) VALUES (7, 'control', "
                    "'error', 1.0, 'ses_1', '{}')", "event 7 (error, session ses_1) has no entry"),
    "session-title": ("UPDATE sessions SET title = 'nothing happened' WHERE id = 'ses_1'",
                      "session ses_1 was rewritten"),
    "session-meta": ("UPDATE sessions SET meta = '{\"template\":\"coding\"}' WHERE id = 'ses_2'",
                     "session ses_2 was rewritten"),
    "session-deleted": ("DELETE FROM sessions WHERE id = 'ses_2'", "session ses_2 is in the audit chain but its row"),
    "session-added": ("INSERT INTO sessions (id, project_id, title, model, created_at, updated_at, meta) VALUES "
                      "('ses_9', 'prj_1', 'x', '', 1.0, 1.0, '{}')", "session ses_9 has no entry"),
    "project-settings": ("UPDATE projects SET settings = '{\"git_commit\":true}' WHERE id = 'prj_1'",
                         "project prj_1 was rewritten"),
    "project-path": ("UPDATE projects SET path = '/home/me' WHERE id = 'prj_1'", "project prj_1 was rewritten"),
    "project-added": ("INSERT INTO projects (id, name, path, image, permission_mode, settings, created_at) VALUES "
                      "('prj_9', 'q', '/q', '', 'auto', '{}', 1.0)", "project prj_9 has no entry"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_a_rewritten_row_the_window_reads_fails_verify_and_is_named(tmp_path: Path, attack: str) -> None:
    db = tmp_path / "audit.db"
    await _fill(f"sqlite:///{db}")
    before = await _verify(f"sqlite:///{db}")
    assert before.ok and "so do 9 events, sessions and projects" in before.message, before.message
    sql, named = ATTACKS[attack]
    raw_sql(db, "PRAGMA foreign_keys = OFF", sql)
    result = await _verify(f"sqlite:///{db}")
    assert not result.ok and any(named in p for p in result.problems), result.problems


async def test_an_events_number_used_again_after_a_deletion_is_named(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await _fill(f"sqlite:///{db}")
    raw_sql(db, "DELETE FROM events WHERE seq = 6")  # the tail: the next event the desk writes takes its number
    store = await SqlStore.open(db)
    store.append_event(_env(6, "error", "a later notice", "ses_2"))
    await store.flush()
    await store.close()
    result = await _verify(f"sqlite:///{db}")
    assert not result.ok and any("event 6 was bound twice" in p for p in result.problems), result.problems


def test_audit_verify_exits_1_naming_the_rows_on_both_databases(store_url: str, desk_env: Path, capsys) -> None:
    import asyncio

    asyncio.run(_fill(store_url, signed=True))
    assert cli.main(["audit", "--db", store_url, "verify"]) == 0
    capsys.readouterr()
    engine = create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE events SET payload = '{}' WHERE seq = 2"))
        conn.execute(text("UPDATE sessions SET title = 'nothing happened' WHERE id = 'ses_1'"))
        conn.execute(text("UPDATE projects SET path = '/elsewhere' WHERE id = 'prj_1'"))
    engine.dispose()
    assert cli.main(["audit", "--db", store_url, "verify"]) == 1
    out = capsys.readouterr()
    said = out.out + out.err
    for named in ("event 2 (error, session ses_1) was rewritten", "session ses_1 was rewritten",
                  "project prj_1 was rewritten"):
        assert named in said, said


async def test_rows_from_before_binding_are_named_not_bound_and_new_ones_are_bound(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.connect() as conn:
        upgrade(conn, url, "0006")  # a database of the version before
    with engine.begin() as conn:  # what that desk stored: rows with no ROWS entry
        conn.execute(text("INSERT INTO projects VALUES ('prj_old', 'p', '/p', '', 'ask', '{}', 1.0)"))
        conn.execute(text("INSERT INTO sessions VALUES ('ses_old', 'prj_old', 't', '', 1.0, 1.0, '{}')"))
        for seq in (1, 2, 3):
            conn.execute(text("INSERT INTO events VALUES (:s, 'control', 'error', 1.0, 'ses_old', '{}')"), {"s": seq})
    engine.dispose()
    store = await SqlStore.open(url)  # opening it migrates it; this desk goes on with the old session
    await store.append_message(StoredMessage("ses_old", "user", [{"type": "text", "text": "again"}]))
    await store.save_session(SessionInfo("ses_new", "prj_old"))
    store.append_event(_env(4, "error", "new", "ses_new"))
    await store.flush()
    await store.close()
    result = await _verify(url)
    assert result.ok, result.message
    assert "3 events, 1 sessions, 1 projects stored before the chain bound them are not bound" in result.message
    raw_sql(tmp_path / "old.db", "UPDATE events SET payload = '{}' WHERE seq = 4",
            "UPDATE events SET payload = '[]' WHERE seq = 1")
    result = await _verify(url)
    assert not result.ok and any("event 4 (error, session ses_new) was rewritten" in p for p in result.problems)
    assert not any("event 1 " in p for p in result.problems)  # an old row: not bound, said so, not "rewritten"
