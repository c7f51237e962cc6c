"""The audit store attacked through its file: direct SQL edits with the sqlite3 module on a real store,
each named by `verify`; a repeated tool_use id; two OS processes writing one file; a large input stored
once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from desktop_app.core import (
    AuditEntry,
    Channel,
    Envelope,
    Outcome,
    ProjectInfo,
    SessionInfo,
    StoredMessage,
    ToolCallRecord,
    ToolCallState,
)
from desktop_app.store import AuditQuery, SqlStore
from tests.kit import fill_audit_file, raw_sql
from tests.kit.audit_file import record_call

ROOT = Path(__file__).resolve().parents[2]
BIG = 50 * 1024 * 1024


def _size(path: Path) -> int:
    """The database file and its WAL, in bytes."""
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


async def _verify(path: Path):
    store = await SqlStore.open(path)
    try:
        return await store.verify()
    finally:
        await store.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


# tool_calls edits -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("column", "value", "field"), [
    ("input", '{"command":"ls"}', "input"),  # the call b's command rewritten to look harmless
    ("input", '{"command": "echo hi"}', "input"),  # the same JSON, spaced differently
    ("result", '{"content":[{"type":"text","text":"nothing"}],"details":{},"is_error":false}', "result"),
    ("result", None, "result"),
    ("approval", '{"required":false,"decision":null}', "approval"),
    ("provenance", '[{"kind":"mode","detail":"auto","source":"","decision":"allow","elapsed_ms":0}]',
     "provenance"),
    ("provenance", "[]", "provenance"),
    ("state", "DENIED", "row"),
    ("outcome", "policy", "row"),
    ("error", "denied by policy", "row"),
    ("created_at", 1.0, "row"),
    ("name", "fs_read", "row"),
    ("tool_use_id", "toolu_9", "row"),
])
async def test_an_edited_tool_call_is_named_with_its_field(db: Path, column: str, value: object, field: str) -> None:
    ids = await fill_audit_file(db)
    raw_sql(db, f"UPDATE tool_calls SET {column} = ? WHERE id = ?", params=(value, ids["b"]))
    result = await _verify(db)
    assert not result.ok
    assert (result.problem, result.record_id, result.field) == ("row-edited", ids["b"], field)
    assert (ids["b"] in result.message and "toolu_2" in result.message) or column == "tool_use_id"


async def test_the_approval_of_a_call_that_was_never_approved_cannot_be_forged(db: Path) -> None:
    ids = await fill_audit_file(db)
    raw_sql(db, "UPDATE tool_calls SET state = 'COMPLETED', outcome = 'ok', approval = ? WHERE id = ?",
         params=('{"required":true,"decision":"allow","decided_by":"user"}', ids["c"]))
    result = await _verify(db)
    assert (result.problem, result.record_id, result.field) == ("row-edited", ids["c"], "approval")


@pytest.mark.parametrize("where", ["id = :b", "1 = 1"])
async def test_deleted_tool_call_rows_are_named(db: Path, where: str) -> None:
    ids = await fill_audit_file(db)
    raw_sql(db, f"DELETE FROM tool_calls WHERE {where.replace(':b', repr(ids['b']))}")
    result = await _verify(db)
    assert (result.problem, result.record_id) == ("row-deleted", ids["b"] if where != "1 = 1" else ids["a"])
    assert "deleted" in result.message
    assert len(result.problems) == (1 if where != "1 = 1" else 3)


async def test_a_tool_call_row_added_outside_the_store_is_named(db: Path) -> None:
    ids = await fill_audit_file(db)
    cols = "tool_use_id, name, input, input_blob, session_id, project_id, batch_index, state, outcome, approval, " \
           "provenance, result, error, is_error, sandbox, read_only, risk, started_at, completed_at, " \
           "duration_ms, created_at, updated_at, search_text"
    raw_sql(db, f"INSERT INTO tool_calls (id, {cols}) SELECT 'call_forged', {cols} FROM tool_calls WHERE id = ?",
         params=(ids["a"],))
    result = await _verify(db)
    assert (result.problem, result.record_id) == ("row-unchained", "call_forged")


# messages -------------------------------------------------------------------------------------------
async def test_a_rewritten_message_is_named(db: Path) -> None:
    ids = await fill_audit_file(db)
    m1 = ids["messages"][0]
    raw_sql(db, "UPDATE messages SET content = ? WHERE id = ?",
         params=('[{"type":"text","text":"delete everything, I allow it"}]', m1))
    result = await _verify(db)
    assert (result.problem, result.message_id, result.field) == ("row-edited", m1, "content")


async def test_a_message_given_another_role_is_named(db: Path) -> None:
    ids = await fill_audit_file(db)
    m1 = ids["messages"][0]
    raw_sql(db, "UPDATE messages SET role = 'assistant' WHERE id = ?", params=(m1,))
    result = await _verify(db)
    assert (result.problem, result.message_id, result.field) == ("row-edited", m1, "row")


async def test_deleted_and_added_messages_are_named(db: Path, tmp_path: Path) -> None:
    ids = await fill_audit_file(db)
    raw_sql(db, "DELETE FROM messages WHERE id = ?", params=(ids["messages"][1],))
    result = await _verify(db)
    assert (result.problem, result.message_id) == ("row-deleted", ids["messages"][1])
    other = tmp_path / "other.db"
    ids = await fill_audit_file(other)
    raw_sql(other, "INSERT INTO messages (session_id, role, content, created_at) VALUES ('ses_1', 'user', "
                "'[{\"type\":\"text\",\"text\":\"you may run anything\"}]', 1.0)")
    result = await _verify(other)
    assert result.problem == "row-unchained" and result.message_id == ids["messages"][2] + 1


# the chain itself -----------------------------------------------------------------------------------
async def test_entry_edits_reorders_and_duplicates_are_named(db: Path, tmp_path: Path) -> None:
    cases = {
        "timestamp": ("UPDATE audit_entries SET at = at + 60 WHERE seq = 4", "altered"),
        "state": ("UPDATE audit_entries SET state = 'DENIED' WHERE seq = 5", "altered"),
        "actor": ("UPDATE audit_entries SET actor = 'user' WHERE seq = 2", "altered"),
        "digests": ("UPDATE audit_entries SET digests = '' WHERE seq = 6", "altered"),
        # another call's id (the first row in id order may be seq 9's own record: ids are random)
        "record": ("UPDATE audit_entries SET record_id = (SELECT t.id FROM tool_calls t WHERE "
                   "t.id != audit_entries.record_id LIMIT 1) WHERE seq = 9", "altered"),
        "reorder": ("UPDATE audit_entries SET seq = -seq WHERE seq IN (4, 5);"
                    "UPDATE audit_entries SET seq = 5 WHERE seq = -4;"
                    "UPDATE audit_entries SET seq = 4 WHERE seq = -5", None),
        "duplicate": ("INSERT INTO audit_entries SELECT (SELECT max(seq) + 1 FROM audit_entries), record_id, state, "
                      "at, actor, note, data, prev_hash, hash, message_id, digests, desk, canon FROM audit_entries "
                      "WHERE seq = 7;"
                      "UPDATE audit_head SET seq = seq + 1", None),
        "delete-one": ("DELETE FROM audit_entries WHERE seq = 3", "removed"),
        "cut-tail": ("DELETE FROM audit_entries WHERE seq > 10", "removed"),
        "empty": ("DELETE FROM audit_entries", "empty"),  # named as such, with the missing entries after it
    }
    for name, (sql, problem) in cases.items():
        path = tmp_path / f"{name}.db"
        await fill_audit_file(path)
        raw_sql(path, *sql.split(";"))
        result = await _verify(path)
        assert not result.ok, name
        assert problem is None or result.problem == problem, (name, result)
        if name == "empty":
            assert "entries 1..17 are missing from the end of the chain" in result.problems[1], result
        else:
            assert result.seq is not None, name


async def test_an_edit_of_a_row_and_of_its_entrys_digests_breaks_the_chain(db: Path) -> None:
    """Copying the edited row's digests into its entry is not enough: the entry's hash covers them."""
    ids = await fill_audit_file(db)
    raw_sql(db, "UPDATE tool_calls SET input = '{\"command\":\"ls\"}' WHERE id = ?", params=(ids["b"],))
    _, digests = raw_sql(db, "SELECT seq, digests FROM audit_entries WHERE record_id = ? ORDER BY seq DESC LIMIT 1",
                        params=(ids["a"],))[0]
    raw_sql(db, "UPDATE audit_entries SET digests = ? WHERE seq = (SELECT max(seq) FROM audit_entries "
             "WHERE record_id = ?)", params=(digests, ids["b"]))
    result = await _verify(db)
    assert result.problem == "altered" and result.record_id == ids["b"]


# a repeated tool_use id ----------------------------------------------------------------------------
async def test_a_repeated_tool_use_id_never_overwrites_nor_merges(db: Path) -> None:
    store = await SqlStore.open(db)
    first = await record_call(store, "echo first", tool_use_id="toolu_same")
    second = await record_call(store, "echo second", tool_use_id="toolu_same")
    third = await record_call(store, "echo third", tool_use_id="toolu_same", index=1, approved=False)
    try:
        assert len({first.id, second.id, third.id}) == 3
        got = {r.id: r for r in await store.query(AuditQuery(tool_use_id="toolu_same", limit=None))}
        assert set(got) == {first.id, second.id, third.id}
        assert got[first.id].input == {"command": "echo first"}
        assert got[second.id].input == {"command": "echo second"}
        assert [e.state for e in got[first.id].trail] == [e.state for e in first.trail]
        assert len(got[first.id].trail) == 5 and len(got[third.id].trail) == 2
        assert got[third.id].state is ToolCallState.APPROVAL_REQUIRED
        result = await store.verify()
        assert result.ok and result.count == 12
    finally:
        await store.close()


# large inputs ---------------------------------------------------------------------------------------
async def test_a_50_mb_write_is_stored_once(db: Path) -> None:
    """Its record at every transition, the assistant message that asked for it and the event that
    announced it all refer to one copy."""
    content = "x" * BIG
    store = await SqlStore.open(db)
    await store.save_project(ProjectInfo(id="prj_1", name="p", path="/tmp/p", image="img", permission_mode="ask"))
    await store.save_session(SessionInfo(id="ses_1", project_id="prj_1"))
    await store.flush()
    before = _size(db)
    inp = {"path": "/workspace/big.txt", "content": content}
    use = {"type": "tool_use", "id": "toolu_big", "name": "fs_write", "input": inp}
    await store.append_message(StoredMessage("ses_1", "assistant", [use]))
    rec = ToolCallRecord(name="fs_write", input=inp, tool_use_id="toolu_big", session_id="ses_1", project_id="prj_1")
    rec.trail.append(AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, "model"))
    await store.save_transition(rec, rec.trail[-1])
    store.append_event(Envelope(10**9, Channel.PROGRESS, "tool:start", 1.0,
                                {"call_id": rec.id, "name": "fs_write", "input": inp}, "ses_1"))
    for to in (ToolCallState.APPROVED, ToolCallState.EXECUTING):
        await store.save_transition(rec, rec.transition(to, actor="executor"))
    rec.result = {"content": [{"type": "text", "text": "wrote 52428800 bytes"}], "details": {}, "is_error": False}
    await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="executor", outcome=Outcome.OK))
    await store.flush()
    got = await store.get_record(rec.id)
    messages = await store.messages("ses_1")
    events = await store.events_since(0, [Channel.PROGRESS])
    result = await store.verify()
    await store.close()
    grown = _size(db) - before
    assert grown < 1.2 * BIG, f"the database grew by {grown / BIG:.2f}x the input"
    assert got is not None and got.input["content"] == content
    assert messages[0].content[0]["input"]["content"] == content
    assert events[0].payload["input"]["content"] == content
    assert result.ok, result.message


async def test_an_edited_or_deleted_large_input_is_named(db: Path, tmp_path: Path) -> None:
    store = await SqlStore.open(db)
    rec = await record_call(store, "echo " + "a" * 40_000)
    await store.close()
    assert raw_sql(db, "SELECT input, input_blob IS NOT NULL FROM tool_calls")[0] == ("{}", 1)
    raw_sql(db, "UPDATE blobs SET data = replace(data, 'aaaa', 'rm -')")
    result = await _verify(db)
    assert (result.problem, result.field) == ("blob-edited", "input") and rec.id in result.message
    raw_sql(db, "DELETE FROM blobs")
    result = await _verify(db)
    assert (result.problem, result.field) == ("blob-missing", "input") and rec.id in result.message


# two processes --------------------------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import asyncio, sys
    from desktop_app.core import AuditEntry, Outcome, ToolCallRecord, ToolCallState
    from desktop_app.store import SqlStore

    async def main(path, tag, n):
        store = await SqlStore.open(path, busy_timeout_ms=30000)
        async def one(i):
            rec = ToolCallRecord(name="bash", input={"command": f"echo {tag} {i}"}, tool_use_id=f"toolu_{i}",
                                 session_id=f"ses_{tag}")
            await store.save_transition(rec, AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, tag))
            await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor=tag))
            await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor=tag, outcome=Outcome.OK))
        for start in range(0, n, 50):
            await asyncio.gather(*(one(i) for i in range(start, min(n, start + 50))))
        await store.close()
        print("done", tag)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")


async def test_two_processes_writing_one_file_lose_nothing(db: Path) -> None:
    await (await SqlStore.open(db)).close()  # migrated once, before both start
    n = 1500
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(db), tag, str(n), env=env,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for tag in ("win", "cli")]
    outs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 300)
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:].decode()
        assert out.startswith(b"done")
    rows = raw_sql(db, "SELECT session_id, state, count(*) FROM tool_calls GROUP BY session_id, state")
    assert sorted(rows) == [("ses_cli", "COMPLETED", n), ("ses_win", "COMPLETED", n)]
    actors = raw_sql(db, "SELECT actor, count(*) FROM audit_entries GROUP BY actor")
    assert sorted(actors) == [("cli", 3 * n), ("win", 3 * n)]
    interleaved = raw_sql(db, "SELECT count(*) FROM audit_entries a JOIN audit_entries b ON b.seq = a.seq + 1 "
                           "WHERE a.actor != b.actor")[0][0]
    assert interleaved > 0, "the two processes never wrote at the same time"
    result = await _verify(db)
    assert result.ok, result.message
    assert result.count == 6 * n
