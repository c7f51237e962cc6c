"""SQLite's WAL checkpoints run beside the writer (desktop_app/store/_checkpoint.py): the log reaches the database
file without a commit doing that work, the writer's own checkpoint stays as a floor, and a checkpointer that
cannot work costs nothing but itself."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sqlite3
import threading
from pathlib import Path

from desktop_app.core import Outcome, ToolCallRecord, ToolCallState
from desktop_app.store import SqlStore
from desktop_app.store._checkpoint import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer

from .conftest import pending


async def _calls(store: SqlStore, n: int) -> None:
    for i in range(n):
        rec = ToolCallRecord(name="bash", input={"command": f"echo {i}"}, session_id="s1")
        await store.save_transition(rec, pending(rec))
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
        await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="engine", outcome=Outcome.OK))


def _in_file_alone(db_path: Path, copy: Path) -> dict[str, int]:
    """The entries per state that the database file holds without its log (a copy of the file alone)."""
    shutil.copyfile(db_path, copy)
    try:
        with sqlite3.connect(copy) as con:
            return dict(con.execute("SELECT state, count(*) FROM audit_entries GROUP BY state").fetchall())
    except sqlite3.DatabaseError:  # copied while a checkpoint was writing it: not yet
        return {}
    finally:
        copy.unlink()


async def test_the_log_reaches_the_file_without_a_commit_doing_it(db_path: Path, tmp_path: Path):
    store = await SqlStore.open(db_path)
    try:
        cp = store._writer.checkpointer
        assert cp is not None and cp.is_alive()
        await _calls(store, 20)  # about 700 pages of log
        await store.flush()
        want = {"PENDING": 20, "EXECUTING": 20, "COMPLETED": 20}
        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while (held := await asyncio.to_thread(_in_file_alone, db_path, tmp_path / "copy.db")) != want:
            assert loop.time() < end, f"the file alone holds {held}: checkpoints {cp.runs}, {cp.last}, {cp.failed!r}"
            await asyncio.sleep(0.1)
        # far under both thresholds at which a commit checkpoints (SQLite's 1,000 pages, the writer's 10,000):
        # the checkpointer's own work
        assert cp.last is not None and cp.last[1] < 1000 < WRITER_AUTOCHECKPOINT_PAGES, cp.last
        assert (await store.verify()).ok
    finally:
        await store.close()
    assert cp.runs >= 1 and not cp.is_alive()
    assert not os.path.exists(f"{db_path}-wal")  # noqa: ASYNC240 (the last connection folds the log in, removes it)


async def test_the_writer_keeps_a_checkpoint_of_its_own_as_a_floor(sqlite_store: SqlStore):
    with sqlite_store._writer._engine.connect() as conn:
        writer = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    with sqlite_store._read_engine.connect() as conn:
        reader = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    assert writer == WRITER_AUTOCHECKPOINT_PAGES
    assert reader == 1000  # SQLite's default: readers never commit, so never checkpoint


async def test_a_checkpointer_that_cannot_open_the_file_says_so_and_the_writes_go_on(
        db_path: Path, tmp_path: Path, caplog):
    cp = Checkpointer(tmp_path / "no such folder" / "audit.db", busy_timeout_ms=100)
    with caplog.at_level(logging.WARNING, logger="desktop_app.store._checkpoint"):
        cp.start()
        cp.join(10)
    assert not cp.is_alive() and cp.runs == 0
    assert "checkpoints stay with its writer" in caplog.text
    store = await SqlStore.open(db_path)
    try:
        store._writer.checkpointer.close()  # gone: the writer's own floor is all that is left
        await _calls(store, 20)
        await store.flush()
        assert (await store.verify()).count == 60
    finally:
        await store.close()


def test_a_close_that_lands_as_a_round_ends_its_wait_still_ends_the_thread(tmp_path: Path):
    """close() between the round's timed wait running out and the rest of the round: the thread still ends
    (the wake close gives was once cleared by that round, and the thread slept on with its join: a CI hang)."""
    with sqlite3.connect(tmp_path / "audit.db") as con:
        con.execute("PRAGMA journal_mode=WAL")
    cp = Checkpointer(tmp_path / "audit.db", busy_timeout_ms=100)

    class CloseAsTheWaitEnds(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            ended = super().wait(timeout)
            if timeout is not None and not ended:  # the round's wait ran out: close() lands now
                self.set()
                cp._wake.set()
            return ended

    cp._closing = CloseAsTheWaitEnds()
    cp.start()
    cp.nudge()  # the first round checkpoints at once
    for _ in range(200):
        if cp.runs:
            break
        threading.Event().wait(0.01)
    assert cp.runs == 1
    cp.nudge()  # the second waits out the interval, and the close lands as it ends
    cp.join(5)
    assert not cp.is_alive(), "the close was lost: the thread sleeps on"
