"""Errors that name the database and its fix: a missing driver, a server that does not answer, an unknown user,
a missing database, a read-only or locked database, each on PostgreSQL with PostgreSQL's hint (never SQLite's),
and SQLite's read-only file with its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from desktop_app.core import StoreError
from desktop_app.store import AuditQuery, SqlStore

from .conftest import make_record, pending, run_to_completion

ROOT = Path(__file__).resolve().parents[2]
SQLITE_WORDS = ("file", "folder", "close the other program", "disk space")


def _admin(url: str) -> psycopg.Connection:
    u = make_url(url)
    return psycopg.connect(host=u.query["host"], user=u.username, dbname="postgres", autocommit=True)


async def _open_error(url: str, **kw) -> StoreError:
    with pytest.raises(StoreError) as info:
        store = await SqlStore.open(url, **kw)
        await store.close()
    return info.value


def _not_sqlite(err: StoreError) -> None:
    assert err.hint and not any(w in err.hint.lower() for w in SQLITE_WORDS), err.hint


def test_a_missing_driver_says_which_extra_to_install(tmp_path: Path) -> None:
    code = (
        "import sys, asyncio\n"
        "sys.modules['psycopg'] = None; sys.modules['psycopg2'] = None\n"
        "from desktop_app.core import StoreError\n"
        "from desktop_app.store import SqlStore\n"
        "for url in ('postgresql+psycopg://me:s3cret@db.example/audit', 'postgresql://me:s3cret@db.example/a'):\n"
        "    try:\n"
        "        asyncio.run(SqlStore.open(url))\n"
        "    except StoreError as exc:\n"
        "        print(exc.user_message())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}).stdout
    assert out.count("agent-desk[postgres]") == 2, out  # one hint for each URL
    assert "driver is not installed" in out and "postgresql+psycopg://" in out
    assert "s3cret" not in out and "db.example" in out


async def test_a_server_that_does_not_answer(tmp_path: Path) -> None:
    err = await _open_error("postgresql+psycopg://me:hunter2@127.0.0.1:1/audit")
    assert "does not answer" in str(err) and "127.0.0.1" in str(err)
    assert "start the server" in err.hint and "hunter2" not in str(err) + err.hint
    _not_sqlite(err)
    err = await _open_error(f"postgresql+psycopg://me@/audit?host={tmp_path}")  # no socket in that folder
    assert "does not answer" in str(err)
    _not_sqlite(err)


async def test_an_unknown_user_and_a_missing_database(postgres_url: str) -> None:
    u = make_url(postgres_url)
    err = await _open_error(str(u.set(username="nobody_here", password="pw123")))
    assert "refused the user 'nobody_here'" in str(err) and "password" in err.hint and "pw123" not in str(err)
    _not_sqlite(err)
    err = await _open_error(str(u.set(database="no_such_db")))
    assert "'no_such_db' does not exist" in str(err) and "createdb" in err.hint
    _not_sqlite(err)


async def test_a_read_only_postgresql_database(postgres_url: str) -> None:
    store = await SqlStore.open(postgres_url)
    kept = await run_to_completion(store, make_record(command="kept"))
    await store.close()
    name = make_url(postgres_url).database
    with _admin(postgres_url) as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    store = await SqlStore.open(postgres_url)  # at head: opening writes nothing
    try:
        rec = make_record(command="during")
        with pytest.raises(StoreError, match="is read-only") as info:
            await store.save_transition(rec, pending(rec))
        assert "primary" in info.value.hint and "earlier records are safe" in str(info.value)
        _not_sqlite(info.value)
        assert (await store.get_record(kept.id)) is not None  # reads go on
    finally:
        await store.close()


async def test_a_locked_postgresql_database_fails_the_write_and_loses_nothing(postgres_url: str) -> None:
    store = await SqlStore.open(postgres_url, busy_timeout_ms=200)
    try:
        done = await run_to_completion(store, make_record(command="before"))
        u = make_url(postgres_url)
        other = psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database)
        other.execute("LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE")  # held until rollback
        try:
            rec = make_record(command="during")
            entry = pending(rec)
            with pytest.raises(StoreError, match="another session holds a lock") as info:
                await store.save_transition(rec, entry)
            assert "200 ms" in str(info.value) and "pg_stat_activity" in info.value.hint
            _not_sqlite(info.value)
            assert entry.seq is None
        finally:
            other.rollback()
            other.close()
        await store.save_transition(rec, entry)  # the writer goes on from the last committed entry
        assert entry.seq == 4 and (await store.get_record(done.id)) is not None
        assert await store.count(AuditQuery()) == 2 and (await store.verify()).ok
    finally:
        await store.close()


async def test_a_read_only_sqlite_file_gets_sqlite_hints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's side of the same errors: its hints name the file. The URI form names its path's file: no
    folder `file:/…` is made where the desk runs, and the desk's messages name the file itself."""
    from desktop_app.config import sqlite_file

    path = tmp_path / "ro.db"
    await (await SqlStore.open(path)).close()
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///file:{path}?mode=ro&uri=true"
    assert sqlite_file(url) == path and sqlite_file(f"sqlite:///file://{path}?uri=1") == path
    assert sqlite_file("sqlite:///file:x.db") == tmp_path / "file:x.db"  # no uri=true: a name, as SQLite reads it
    store = await SqlStore.open(url)
    assert not (tmp_path / "file:").exists()
    try:
        rec = make_record()
        with pytest.raises(StoreError, match="read-only") as info:
            await store.save_transition(rec, pending(rec))
        assert "file" in info.value.hint and "PostgreSQL" not in str(info.value)
    finally:
        await store.close()
