"""verify with its chain walk in a second process (what a long chain gets) gives the same verdict as the walk in
this process, for every attack on the chain and the rows beside it; a worker that cannot start or dies leaves
the verdict to the walk here, never to nothing; the worker judges only the entries of verify's own snapshot."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_app.store import SqlStore
from desktop_app.store._tables import AuditEntryRow, columns
from desktop_app.store.integrity import _verify as verify_module
from desktop_app.store.integrity._chain import WALK_COLUMNS, walk_file, walk_result
from tests.kit import fill_audit_file, raw_sql
from tests.kit.audit_file import record_call

ATTACKS = {
    "intact": (),
    "entry-note": ("UPDATE audit_entries SET note = 'nothing' WHERE seq = 8",),
    "entry-at": ("UPDATE audit_entries SET at = at + 1 WHERE seq = 11",),
    "message-entry": ("UPDATE audit_entries SET actor = 'user' WHERE seq = 4",),
    "entry-deleted": ("DELETE FROM audit_entries WHERE seq = 8",),
    "tail-cut": ("DELETE FROM audit_entries WHERE seq > 14",),
    "tail-cut-head-moved": ("DELETE FROM audit_entries WHERE seq > 14",
                            "UPDATE audit_head SET seq = 14, hash = (SELECT hash FROM audit_entries WHERE seq = 14)"),
    "inserted-past-head": ("INSERT INTO audit_entries SELECT seq + 100, record_id, state, at, actor, note, data, "
                           "hash, hash, message_id, digests, desk, canon FROM audit_entries WHERE seq = 17",),
    "emptied": ("DELETE FROM audit_entries",),
    "emptied-with-head": ("DELETE FROM audit_entries", "DELETE FROM audit_head"),
    "row-edited": ("UPDATE tool_calls SET input = '{\"command\":\"ls\"}' WHERE tool_use_id = 'toolu_2'",),
    "rows-deleted": ("DELETE FROM tool_calls",),
    "message-edited": ("UPDATE messages SET content = '[]' WHERE id = 1",),
    "message-deleted": ("DELETE FROM messages WHERE id = 2",),
    # verify cuts the 17 entries in chunks 1-4, 5-8, 9-12, 13-17 (CHUNKS = 4): inside a middle chunk, at a
    # boundary (the first entry of a chunk, the last one of the chunk before, the link between them), a chunk
    # gone (the entries above at 8 and 11 fall on a boundary and in a middle chunk too)
    "chunk-middle": ("UPDATE audit_entries SET note = 'nothing' WHERE seq = 10",),
    "chunk-first": ("UPDATE audit_entries SET actor = 'someone' WHERE seq = 9",),
    "chunk-link": ("UPDATE audit_entries SET prev_hash = hash WHERE seq = 9",),
    "chunk-last-hash": ("UPDATE audit_entries SET hash = prev_hash WHERE seq = 12",),
    "chunk-deleted": ("DELETE FROM audit_entries WHERE seq BETWEEN 5 AND 8",),
    "head-hash": ("UPDATE audit_head SET hash = (CASE WHEN hash LIKE '0%' THEN '1' ELSE '0' END) || substr(hash, 2)",),
}


async def verify_here_and_in_chunks(db: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    """verify walked in this process, then in chunks by four worker processes (also used by
    test_audit_awkward_entries.py)."""
    caplog.set_level(logging.WARNING)
    results = []
    # in this process, then in chunks walked by four others (one chunk, in one other, is the same code)
    for minimum, chunks in ((10**9, None), (0, 4)):
        monkeypatch.setattr(verify_module, "PARALLEL_MIN", minimum)
        monkeypatch.setattr(verify_module, "CHUNKS", chunks)
        store = await SqlStore.open(db)
        try:
            results.append(await store.verify())
        finally:
            await store.close()
    assert "second process failed" not in caplog.text and "in this process" not in caplog.text, caplog.text
    return results


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_the_walk_in_a_second_process_gives_the_same_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture,
                                                                   attack: str) -> None:
    db = tmp_path / "audit.db"
    await fill_audit_file(db)
    assert raw_sql(db, "SELECT max(seq) FROM audit_entries") == [(17,)]  # 15, and 2 ROWS entries
    if ATTACKS[attack]:
        raw_sql(db, "PRAGMA foreign_keys = OFF", *ATTACKS[attack])
    here, there = await verify_here_and_in_chunks(db, monkeypatch, caplog)
    assert here == there
    assert here.ok == (attack == "intact"), here.message


def test_the_worker_really_runs_as_a_script_of_the_standard_library(tmp_path: Path) -> None:
    """The worker is _chain.py run with -I -S: nothing of the project, nor site-packages, is importable."""
    import asyncio

    db = tmp_path / "audit.db"
    asyncio.run(fill_audit_file(db))
    out = subprocess.run([sys.executable, "-I", "-S", verify_module.chain_module.__file__, str(db), "17"],
                         capture_output=True, text=True, check=True)
    failure, count, rows, last_message, _ = walk_result(json.loads(out.stdout))
    assert failure is not None and failure.problem == "inserted"  # no head given: every entry lies past it
    out = subprocess.run([sys.executable, "-I", "-S", verify_module.chain_module.__file__, str(db), "17", "-", "-",
                          "1", "2", "3"], capture_output=True, text=True, check=True)  # and the rows of pk 2..3
    assert json.loads(out.stdout)["rows_checked"] == {"checked": 2, "legacy": 0, "suspect": [], "blobs": []}
    head = raw_sql(db, "SELECT seq, hash FROM audit_head")[0]
    failure, count, rows, last_message, _ = walk_result(walk_file(str(db), 17, head))
    assert (failure, count, rows, sorted(last_message)) == (None, 17, 17, [1, 2, 3])


def test_the_worker_judges_only_the_entries_of_verifys_snapshot(tmp_path: Path) -> None:
    """Entries past `top` (committed after verify's snapshot began) are not read, so they are not "inserted"."""
    import asyncio

    db = tmp_path / "audit.db"
    asyncio.run(fill_audit_file(db))
    (seq, h), = raw_sql(db, "SELECT seq, hash FROM audit_entries WHERE seq = 14")
    failure, count, rows, _, _ = walk_result(walk_file(str(db), 14, (seq, h)))
    assert (failure, count, rows) == (None, 14, 14)


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"], ids=["cannot-start", "fails"])
async def test_a_worker_that_cannot_walk_leaves_it_to_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture,
                                                                    executable: str) -> None:
    db = tmp_path / "audit.db"
    await fill_audit_file(db)
    raw_sql(db, "UPDATE audit_entries SET note = 'nothing' WHERE seq = 6",
            "UPDATE tool_calls SET input = '{\"command\":\"ls\"}' WHERE tool_use_id = 'toolu_2'")
    monkeypatch.setattr(verify_module, "PARALLEL_MIN", 0)
    monkeypatch.setattr(verify_module.sys, "executable", executable)
    caplog.set_level(logging.WARNING)
    store = await SqlStore.open(db)
    try:
        result = await store.verify()
    finally:
        await store.close()
    assert (result.ok, result.problem, result.seq) == (False, "altered", 6)
    assert "walks the chain in this process" in caplog.text or "walking it here" in caplog.text
    # the rows the worker should have checked are checked here
    assert [p for p in result.problems if "(tool_use toolu_2) was edited" in p and "input" in p], result.problems


def test_the_walk_reads_the_entry_columns_in_the_tables_order() -> None:
    assert tuple(columns(AuditEntryRow)) == WALK_COLUMNS


# The rows are cut in chunks of pk too: with twelve calls and CHUNKS = 4, pks 1-3, 4-6, 7-9 and 10-12.
ROW_ATTACKS = {
    "row-middle-chunk": (("UPDATE tool_calls SET input = '{\"command\":\"ls\"}' WHERE pk = 5",), "row-edited", 5,
                         "input"),
    "row-chunk-first": (("UPDATE tool_calls SET result = NULL WHERE pk = 7",), "row-edited", 7, "result"),
    "row-chunk-last": (("UPDATE tool_calls SET state = 'DENIED' WHERE pk = 6",), "row-edited", 6, "row"),
    "row-deleted-chunk-first": (("DELETE FROM tool_calls WHERE pk = 10",), "row-deleted", 10, None),
    "row-unchained-at-end": (("INSERT INTO tool_calls SELECT 13, 'call_forged', name, input, session_id, project_id, "
                              "batch_index, state, outcome, approval, provenance, result, error, is_error, sandbox, "
                              "read_only, risk, started_at, completed_at, duration_ms, created_at, updated_at, "
                              "search_text, 'toolu_f', input_blob FROM tool_calls WHERE pk = 12",),
                             "row-unchained", 13, None),
    # the first finding named is the same however the rows are cut: the edit in the first chunk, then the rest
    "rows-in-three-chunks": (("UPDATE tool_calls SET approval = '{}' WHERE pk = 11",
                              "UPDATE tool_calls SET provenance = '[]' WHERE pk = 3",
                              "UPDATE tool_calls SET error = 'x' WHERE pk = 4"), "row-edited", 3, "provenance"),
}


@pytest.mark.parametrize("attack", list(ROW_ATTACKS))
async def test_rows_checked_in_chunks_by_the_workers_give_the_same_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, attack: str) -> None:
    db = tmp_path / "audit.db"
    await fill_audit_file(db)
    store = await SqlStore.open(db)
    try:
        for k in range(4, 13):
            await record_call(store, f"echo {k}", tool_use_id=f"toolu_{k}")
    finally:
        await store.close()
    ids = dict(raw_sql(db, "SELECT pk, id FROM tool_calls"))
    assert sorted(ids) == list(range(1, 13))
    statements, problem, pk, field = ROW_ATTACKS[attack]
    raw_sql(db, *statements)
    here, there = await verify_here_and_in_chunks(db, monkeypatch, caplog)
    assert here == there
    assert "rows check" not in caplog.text, caplog.text
    assert (here.ok, here.problem, here.field) == (False, problem, field), here.message
    assert here.record_id == ids.get(pk, "call_forged")
    if attack == "rows-in-three-chunks":
        assert len(here.problems) == 3 and [ids[3], ids[4], ids[11]] == [
            next(i for i in ids.values() if i in p) for p in here.problems]
