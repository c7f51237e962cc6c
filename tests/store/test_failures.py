"""A locked or full database fails the write visibly, loses nothing committed, and the writer goes on.

About SQLite itself (its file lock, its page limit); test_db_errors.py does the same to PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from desktop_app.core import Channel, Envelope, StoreError, ToolCallState
from desktop_app.store import AuditQuery, SqlStore

from .conftest import make_record, pending, run_to_completion


async def test_locked_database(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = await SqlStore.open(path, busy_timeout_ms=150)
    done = await run_to_completion(store, make_record(command="before"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past busy_timeout
    try:
        rec = make_record(command="during")
        entry = pending(rec)
        with pytest.raises(StoreError, match="locked by another program") as info:
            await store.save_transition(rec, entry)
        assert "150 ms" in str(info.value) and info.value.hint
        assert entry.seq is None and entry.hash is None
        store.append_event(Envelope(1, Channel.PROGRESS, "text_chunk", 1.0, {"text": "lost"}))
        with pytest.raises(StoreError, match="could not be saved"):
            await store.flush()
        # Reads still work while the lock is held (WAL).
        assert (await store.get_record(done.id)) is not None
    finally:
        other.execute("ROLLBACK")
        other.close()
    # The writer keeps working, and the chain goes on from the last committed entry.
    await store.save_transition(rec, entry)
    assert entry.seq == 4
    await run_to_completion(store, make_record(command="after"))
    assert await store.count(AuditQuery()) == 3
    result = await store.verify()
    assert result.ok and result.count == 7
    await store.close()


async def test_full_database(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    store = await SqlStore.open(path)
    kept = [await run_to_completion(store, make_record(command=f"kept {i}")) for i in range(3)]
    pages = await store._run_in_writer(lambda c: c.execute(text("PRAGMA page_count")).scalar())
    # Cap the file at its current size: the next write that needs a new page fails as on a full disk.
    await store._run_in_writer(lambda c: c.execute(text(f"PRAGMA max_page_count = {pages}")))
    big = make_record("fs_write", path="/workspace/big.bin", content="x" * 400_000)
    with pytest.raises(StoreError, match="full") as info:
        await store.save_transition(big, pending(big))
    assert "free some disk space" in info.value.hint
    assert await store.get_record(big.id) is None
    for rec in kept:
        got = await store.get_record(rec.id)
        assert got is not None and got.state is ToolCallState.COMPLETED and len(got.trail) == 3
    # Space comes back: the same writer saves the write that failed.
    await store._run_in_writer(lambda c: c.execute(text("PRAGMA max_page_count = 1073741823")))
    await store.save_transition(big, pending(big))
    assert big.trail[-1].seq == 10
    assert (await store.verify()).ok
    await store.close()
