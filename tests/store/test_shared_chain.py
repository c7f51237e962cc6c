"""Many desks, one chain: writer processes (each its own key, host and user) append to one database at the same
time, on PostgreSQL and on a SQLite file; nothing is lost, each entry names the desk that wrote it, and `verify`
checks every desk's entries with that desk's key. A writer killed inside its transaction leaves nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from desktop_app.store import HeadSigner, SqlStore, canonical_json
from desktop_app.store.integrity._chain import entry_fields, split_canonical
from desktop_app.store.integrity._signing import key_id_of
from tests.store.chain_writer import Desk, run_desks
from tests.store.conftest import make_record, run_to_completion

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["postgresql", "sqlite"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database that several desks write: a fresh PostgreSQL database, or a SQLite file (one machine)."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'shared.db'}"


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _key(d: Desk) -> str:
    return HeadSigner(d.seed, host=d.host, user=d.user).key_id


async def _verify(url: str):
    store = await SqlStore.open(url)
    try:
        return await store.verify()
    finally:
        await store.close()


async def test_four_desks_write_one_chain_at_once(shared_url: str) -> None:
    records = 40  # three entries each, and one message per desk
    desks = run_desks(shared_url, 4, records)
    every = dict(_rows(shared_url, "SELECT seq, desk FROM audit_entries"))
    assert sorted(every) == list(range(1, len(every) + 1))  # no seq lost, none twice, no gap
    # each desk's project and session rows are bound by ROWS entries of their own (one or more per desk)
    entries = dict(_rows(shared_url, "SELECT seq, desk FROM audit_entries WHERE state != 'ROWS'"))
    total = 4 * (3 * records + 1)
    assert len(entries) == total and len(every) - total >= 4
    for d in desks:
        assert len(d.seqs) == 3 * records  # every acknowledged transition is there, named after its writer
        assert {entries[s] for s in d.seqs} == {_key(d)}
        assert sum(1 for k in entries.values() if k == _key(d)) == 3 * records + 1  # and its message
        # They wrote at the same time: every other desk's middle record lies between this desk's first and last
        # entries (run_desks holds each step until every desk finished the one before, so a store that let one
        # desk write its whole share first would stall the steps rather than pass).
        for e in desks:
            if e is not d:
                assert min(d.seqs) < sorted(e.seqs)[3 * (records // 2)] < max(d.seqs)
    keys = {r[0]: r[1:] for r in _rows(shared_url, "SELECT key_id, host, user_name, first_seq FROM desk_keys")}
    assert {k: v[:2] for k, v in keys.items()} == {_key(d): (d.host, d.user) for d in desks}  # registered once
    for d in desks:
        assert keys[_key(d)][2] == min(s for s, k in every.items() if k == _key(d))  # on its first write
    result = await _verify(shared_url)
    assert result.ok, result.message
    assert result.count == len(every)
    mine = {_key(d): sum(1 for k in every.values() if k == _key(d)) for d in desks}
    assert all(f"{d.user}@{d.host} [{_key(d)[:20]}…] {mine[_key(d)]}" in result.message for d in desks)


async def test_two_desks_racing_on_an_empty_database_share_one_genesis(shared_url: str) -> None:
    """Both open the new database (and migrate it) and write their first entry at the same moment."""
    desks = run_desks(shared_url, 2, 2, tasks=2)
    first = _rows(shared_url, "SELECT seq, prev_hash FROM audit_entries WHERE seq = 1")
    assert first == [(1, "0" * 64)]
    assert len(_rows(shared_url, "SELECT db_id FROM audit_db")) == 1
    assert sorted(s for d in desks for s in d.seqs) == sorted(set(s for d in desks for s in d.seqs))
    result = await _verify(shared_url)
    chained = _rows(shared_url, "SELECT count(*) FROM audit_entries WHERE state != 'ROWS'")[0][0]
    assert result.ok and chained == 2 * (3 * 2 + 1), result.message


def _kill_inside_transaction(url: str, seed: bytes) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.chain_writer", "hang", url, seed.hex()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside", proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


async def test_a_writer_killed_inside_its_transaction_leaves_nothing(postgres_url: str) -> None:
    """The desk dies after its entry, its key and its signed batch were written, before the commit: the server
    rolls it all back and frees the chain's lock, and the next desk appends where the chain really ends."""
    survivor = HeadSigner(os.urandom(32), host="survivor", user="alice")
    store = await SqlStore.open(postgres_url, signer=survivor)
    try:
        await run_to_completion(store, make_record(command="before"))
        seed = os.urandom(32)
        await asyncio.to_thread(_kill_inside_transaction, postgres_url, seed)
        rec = await run_to_completion(store, make_record(command="after"))  # waits on no lock left behind
        assert [e.seq for e in rec.trail] == [4, 5, 6]
    finally:
        await store.close()
    doomed = key_id_of(HeadSigner(seed).public_key)
    assert _rows(postgres_url, f"SELECT count(*) FROM audit_entries WHERE desk = '{doomed}'") == [(0,)]
    assert _rows(postgres_url, f"SELECT count(*) FROM desk_keys WHERE key_id = '{doomed}'") == [(0,)]
    assert _rows(postgres_url, "SELECT count(*) FROM tool_calls WHERE session_id = 'ses_doomed'") == [(0,)]
    result = await _verify(postgres_url)
    assert result.ok and result.count == 6, result.message


async def test_a_chain_begun_before_desks_were_named_carries_on_with_desks(shared_url: str) -> None:
    """Entries from before this change (or from a store without a key) name no desk; the desks that write
    after them are checked from their first batch on, and the older entries stay as they were."""
    store = await SqlStore.open(shared_url)
    try:
        await run_to_completion(store, make_record(command="older"))
    finally:
        await store.close()
    signer = HeadSigner(os.urandom(32), host="later", user="carol")
    store = await SqlStore.open(shared_url, signer=signer)
    try:
        await run_to_completion(store, make_record(command="newer"))
    finally:
        await store.close()
    assert _rows(shared_url, "SELECT desk FROM audit_entries ORDER BY seq") == [("",)] * 3 + [(signer.key_id,)] * 3
    result = await _verify(shared_url)
    assert result.ok and result.count == 6, result.message
    assert f"carol@later [{signer.key_id[:20]}…] 3" in result.message


@pytest.mark.parametrize("desk", ["", "ed25519:0123456789abcdef0123456789abcdef", 'ed"\u00e9\n'])
@pytest.mark.parametrize("message_id", [None, 7])
def test_the_writers_canonical_form_with_a_desk_is_canonical_json(desk: str, message_id: int | None) -> None:
    """What the writer hashes (split around the seq) is the canonical JSON that verify-export re-computes."""
    digests = "row:" + "0" * 64
    prefix, suffix = split_canonical("call_1", "COMPLETED", 1.5, "engine", "n", '{"a":[1,2]}', digests, message_id,
                                     desk)
    fields = entry_fields("call_1", "COMPLETED", 1.5, "engine", "n", {"a": [1, 2]}, 42, digests, message_id, desk)
    assert f"{prefix}42{suffix}" == canonical_json(fields)
    assert ('"desk"' in prefix) == bool(desk)
