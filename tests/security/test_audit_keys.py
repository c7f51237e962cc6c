"""The keyed audit chain attacked on real SQLite files: tail cuts, deletion of everything, a chain recomputed
with hashlib after an edit (no key), foreign and late keys, forged witnesses; signed exports checked offline and
tampered ones refused; the signing key's file is 0600, made once, never followed through a link, never logged."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import multiprocessing
import os
import sqlite3
from pathlib import Path

import keyring
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from keyring.backend import KeyringBackend
from keyring.errors import PasswordSetError

from desktop_app import cli
from desktop_app.config import SIGNING_KEY_FILE, desk_signing_key, witness_dir
from desktop_app.core import ConfigError, ProjectInfo, SessionInfo, StoredMessage, StoreError
from desktop_app.runtime import head_signer, open_store
from desktop_app.store import AuditQuery, HeadSigner, SqlStore, canonical_json, verify_export
from desktop_app.store.integrity._chain import GENESIS
from desktop_app.store.integrity._signing import SignedHead
from desktop_app.store.integrity._witness import db_identity, witness_name
from tests.store.conftest import make_record, pending, run_to_completion

RECORDS = 4  # three entries each: 12 in the chain, and the ROWS entries of the project and the session: 14


@pytest.fixture
def desk(tmp_path: Path, desk_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A headless installation (no keyring: the key is a file) with its own data folder; returns the db path."""
    monkeypatch.delenv("AGENT_DESK_DB", raising=False)
    return tmp_path / "desk.db"


async def _fill(db: Path, records: int = RECORDS, session: str = "ses_1") -> list[str]:
    store = await open_store(str(db))
    try:
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
        await store.save_session(SessionInfo(session, "prj_1"))
        ids = [(await run_to_completion(store, make_record(command=f"echo {i}", session_id=session))).id
               for i in range(records)]
    finally:
        await store.close()
    return ids


async def _verify(db: Path):
    store = await open_store(str(db))
    try:
        return await store.verify()
    finally:
        await store.close()


def _sql(db: Path, *statements: str, params: tuple = ()) -> list:
    con = sqlite3.connect(db)
    try:
        out = []
        for st in statements:
            out = con.execute(st, params if "?" in st else ()).fetchall()
        con.commit()
        return out
    finally:
        con.close()


def _witness(db: Path) -> Path:
    return witness_dir() / witness_name(db_identity(db, ""), head_signer().key_id)


def _cut_tail(db: Path, n: int) -> None:
    """Delete the last n entries and move audit_head back onto the new last one, as an attacker would."""
    top = _sql(db, "SELECT max(seq) FROM audit_entries")[0][0]
    keep = top - n
    _sql(db, f"DELETE FROM audit_entries WHERE seq > {keep}")
    _sql(db, f"DELETE FROM audit_batches WHERE last_seq > {keep}")  # each commit's signed batch names its end
    last_hash = _sql(db, f"SELECT hash FROM audit_entries WHERE seq = {keep}")[0][0]
    _sql(db, "UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1", params=(keep, last_hash))


def _recompute(db: Path, from_seq: int = 1) -> None:
    """Re-hash every entry from `from_seq` with plain hashlib, in the store's own entry format (digests, message
    ids and desks included): what an attacker without the key can do. Only a signature or the witness tells."""
    rows = _sql(db, "SELECT seq, record_id, state, at, actor, note, data, digests, message_id, desk "
                "FROM audit_entries ORDER BY seq")
    prev = GENESIS
    con = sqlite3.connect(db)
    for seq, rid, state, at, actor, note, data, digests, message_id, desk in rows:
        if seq < from_seq:
            prev = con.execute("SELECT hash FROM audit_entries WHERE seq = ?", (seq,)).fetchone()[0]
            continue
        fields = {"record_id": rid, "state": state, "at": at, "actor": actor, "note": note,
                  "data": json.loads(data), "seq": seq}
        if digests:
            fields.update(digests=digests, message_id=message_id)
        if desk:
            fields["desk"] = desk
        h = hashlib.sha256((prev + canonical_json(fields)).encode()).hexdigest()
        con.execute("UPDATE audit_entries SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, h, seq))
        prev = h
    con.execute("UPDATE audit_head SET hash = ? WHERE id = 1", (prev,))
    con.commit()
    con.close()


# the intact chain -----------------------------------------------------------------------------------------
async def test_intact_chain_is_signed_registered_and_witnessed(desk: Path) -> None:
    await _fill(desk)
    result = await _verify(desk)
    signer = head_signer()
    assert result.ok, result.message
    assert result.count == 3 * RECORDS + 2
    assert signer.key_id in result.message and "witness at entry 14 matches" in result.message
    (key_id, pub, host, user, first_seq), = _sql(
        desk, "SELECT key_id, public_key, host, user_name, first_seq FROM desk_keys")
    assert (key_id, base64.b64decode(pub), first_seq) == (signer.key_id, signer.public_key, 1)
    assert host and user
    (seq, count, sig_key), = _sql(desk, "SELECT seq, count, key_id FROM audit_head_signatures")
    assert (seq, count, sig_key) == (14, 14, signer.key_id)
    w = _witness(desk)
    data = json.loads(w.read_text())
    assert (data["db"], data["seq"], data["count"], data["key_id"]) == (db_identity(desk, ""), 14, 14, signer.key_id)
    assert data["db_id"] == _sql(desk, "SELECT db_id FROM audit_db")[0][0] and data["signature"]
    assert w.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in w.parent.iterdir()] == [w.name]  # no temp file left behind


async def test_chain_goes_on_across_reopen_and_the_key_is_registered_once(desk: Path) -> None:
    await _fill(desk, 2)
    await _fill(desk, 2, session="ses_2")
    result = await _verify(desk)
    assert result.ok and result.count == 16, result.message
    assert _sql(desk, "SELECT count(*), min(first_seq) FROM desk_keys") == [(1, 1)]


# tail cuts -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("also_remove", [
    (),
    ("DELETE FROM audit_head_signatures",),
    ("DELETE FROM audit_head_signatures", "DELETE FROM desk_keys"),
    ("DELETE FROM audit_head_signatures", "DELETE FROM desk_keys", "DELETE FROM audit_db"),
], ids=["head-moved-back", "signatures-removed", "keys-removed", "identity-removed"])
async def test_a_cut_tail_fails_verify(desk: Path, also_remove: tuple[str, ...]) -> None:
    await _fill(desk)
    _cut_tail(desk, 2)
    if also_remove:
        _sql(desk, *also_remove)
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "truncated")
    assert "2 entries missing at the tail" in result.message
    # Named first, the cut hides nothing: the call whose last entries went is still reported.
    assert result.problems[0].startswith("2 entries missing at the tail")
    assert any("was edited in tool_calls" in p for p in result.problems[1:])


@pytest.mark.parametrize("remove", [
    ("DELETE FROM audit_head_signatures",),
    ("DELETE FROM audit_head_signatures", "DELETE FROM desk_keys"),
], ids=["signatures", "signatures-and-keys"])
async def test_removed_signatures_fail_verify_even_without_a_cut(desk: Path, remove: tuple[str, ...]) -> None:
    await _fill(desk)
    _sql(desk, *remove)
    _witness(desk).unlink()
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "unsigned")
    assert ("signatures were removed" if len(remove) == 1 else "signed by no key") in result.message


async def test_a_cut_tail_is_still_seen_without_the_witness(desk: Path) -> None:
    await _fill(desk)
    _cut_tail(desk, 3)
    _witness(desk).unlink()
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "truncated")
    assert "3 entries missing at the tail" in result.message


async def test_a_witness_rolled_back_by_a_cut_with_its_signature_kept_fails(desk: Path) -> None:
    """The signed head row is rewound to an older head that the same key really signed (a replay)."""
    await _fill(desk, 2)
    old = _sql(desk, "SELECT key_id, db_id, seq, hash, count, signature, signed_at FROM audit_head_signatures")[0]
    old_witness = _witness(desk).read_bytes()
    await _fill(desk, 2, session="ses_2")
    _cut_tail(desk, 8)  # the second fill: its project and session ROWS entries and its calls' entries
    _sql(desk, "UPDATE audit_head_signatures SET seq = ?, hash = ?, count = ?, signature = ?",
         params=(old[2], old[3], old[4], old[5]))
    assert (await _verify(desk)).problem == "truncated"  # the witness saw entry 16
    _witness(desk).write_bytes(old_witness)  # both rolled back: the rows of the cut calls still tell
    result = await _verify(desk)
    assert (result.ok, result.problem, result.count) == (False, "row-unchained", 8)
    assert "has no entry in the audit chain" in result.message
    _sql(desk, "DELETE FROM tool_calls WHERE session_id = 'ses_2'")  # and the rows: the session's row still tells
    result = await _verify(desk)
    assert not result.ok and any("session ses_2 has no entry in the audit chain" in p for p in result.problems)
    _sql(desk, "DELETE FROM sessions WHERE id = 'ses_2'")  # and the project's row, saved again with ses_2
    result = await _verify(desk)
    assert not result.ok and any("project prj_1 was rewritten" in p for p in result.problems), result.problems


# deletion of everything ----------------------------------------------------------------------------------
async def test_an_emptied_chain_with_sessions_is_a_failure(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "DELETE FROM audit_entries", "DELETE FROM audit_head")
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "empty")
    assert "empty, yet the database holds 1 session(s), 4 tool call(s)" in result.message
    # The signed batches still name the entries that were there, and each call's row is unchained.
    # (and the session's and the project's rows: 8 problems)
    assert len(result.problems) == 8 and "entries 1..14 are missing at the tail" in result.problems[1]
    assert all("has no entry in the audit chain" in p for p in result.problems[2:])


async def test_a_session_opened_and_never_used_is_not_an_emptied_chain(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    store = await open_store(str(db))
    try:
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
        await store.save_session(SessionInfo("ses_new", "prj_1"))
    finally:
        await store.close()
    result = await _verify(db)
    assert result.ok, result.message


async def test_entries_deleted_with_the_head_row_kept_are_an_emptied_chain(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "DELETE FROM audit_entries")
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "empty")
    assert any("entries 1..14 are missing" in p for p in result.problems)


async def test_an_emptied_chain_without_a_signer_is_still_a_failure(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "DELETE FROM audit_entries", "DELETE FROM audit_head", "DELETE FROM audit_head_signatures",
         "DELETE FROM desk_keys")
    store = await SqlStore.open(desk)  # no key, no witness: what a plain store can still tell
    result = await store.verify()
    await store.close()
    assert (result.ok, result.problem) == (False, "empty")


async def test_a_wiped_database_is_named_by_its_witness(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, *(f"DELETE FROM {t}" for t in ("audit_entries", "audit_head", "audit_head_signatures", "desk_keys",
                                               "audit_db", "tool_calls", "messages", "events", "sessions",
                                               "projects")))
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "truncated")
    assert "14 entries missing at the tail" in result.message


async def test_a_database_file_replaced_by_a_fresh_one_is_named_by_its_witness(desk: Path) -> None:
    await _fill(desk)
    for p in (desk, Path(f"{desk}-wal"), Path(f"{desk}-shm")):
        p.unlink(missing_ok=True)
    await (await SqlStore.open(desk)).close()
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "truncated")


# recomputation without the key ---------------------------------------------------------------------------
async def test_the_attackers_recomputation_is_the_stores_own_format(desk: Path) -> None:
    """The control for the tests below: re-hashed without an edit, the chain is the store's, so their failures
    come from the signatures and the witness, never from a format the attacker got wrong."""
    await _fill(desk)
    store = await open_store(str(desk))
    await store.append_message(StoredMessage("ses_1", "user", [{"type": "text", "text": "hi"}]))
    await store.close()
    before = _sql(desk, "SELECT seq, hash FROM audit_entries ORDER BY seq")
    _recompute(desk)
    assert _sql(desk, "SELECT seq, hash FROM audit_entries ORDER BY seq") == before
    result = await _verify(desk)
    assert result.ok and result.count == 15, result.message


@pytest.mark.parametrize("edit", [
    "UPDATE audit_entries SET note = 'nothing happened' WHERE seq = 2",
    "UPDATE audit_entries SET actor = 'user' WHERE seq = 12",
    "UPDATE audit_entries SET data = '{\"approved\":true}' WHERE seq = 5",
    "DELETE FROM audit_entries WHERE seq = 3",
], ids=["note", "last-actor", "data", "deleted-and-relinked"])
async def test_a_recomputed_chain_fails_verify(desk: Path, edit: str) -> None:
    await _fill(desk)
    _sql(desk, "PRAGMA foreign_keys = OFF", edit)
    if edit.startswith("DELETE"):  # renumber, so the seqs run on without a gap
        _sql(desk, "UPDATE audit_entries SET seq = seq - 1 WHERE seq > 3", "UPDATE audit_head SET seq = 11")
    _recompute(desk)
    result = await _verify(desk)
    assert not result.ok
    assert result.problem in ("rewritten", "truncated"), result.message
    if result.problem == "rewritten":
        assert "recomputed after an edit" in result.message


async def test_a_recomputed_chain_with_a_rewritten_signature_row_fails(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "UPDATE audit_entries SET note = 'x' WHERE seq = 4")
    _recompute(desk)
    new_hash = _sql(desk, "SELECT hash FROM audit_head")[0][0]
    _sql(desk, "UPDATE audit_head_signatures SET hash = ?", params=(new_hash,))
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "bad-signature")
    assert "without the key" in result.message


def _attacker_signs(db: Path, first_seq: int = 1) -> HeadSigner:
    """An attacker's own key, registered in the database, signing the (recomputed) head properly."""
    attacker = HeadSigner(Ed25519PrivateKey.generate().private_bytes_raw(), host="evil", user="mallory")
    (seq, h), = _sql(db, "SELECT seq, hash FROM audit_head")
    db_id = _sql(db, "SELECT db_id FROM audit_db")[0][0]
    head = attacker.sign_head(db_id, seq, h, seq)
    _sql(db, "INSERT INTO desk_keys VALUES (?, 'ed25519', ?, 'evil', 'mallory', 0, ?)",
         params=(attacker.key_id, base64.b64encode(attacker.public_key).decode(), first_seq))
    _sql(db, "INSERT INTO audit_head_signatures VALUES (?, ?, ?, ?, ?, ?, ?)",
         params=(attacker.key_id, db_id, seq, h, seq, head.signature, head.signed_at))
    return attacker


@pytest.mark.parametrize("drop_own", [False, True], ids=["own-head-kept", "own-key-and-head-removed"])
async def test_a_recomputed_chain_signed_by_an_attackers_key_fails(desk: Path, drop_own: bool) -> None:
    await _fill(desk)
    _sql(desk, "UPDATE audit_entries SET note = 'x' WHERE seq = 4")
    _recompute(desk)
    if drop_own:
        _sql(desk, "DELETE FROM audit_head_signatures", "DELETE FROM desk_keys")
    _attacker_signs(desk)
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "rewritten"), result.message


@pytest.mark.parametrize("edit, problem", [
    ("UPDATE audit_db SET db_id = 'another'", "bad-signature"),
    ("UPDATE audit_head_signatures SET count = count - 1", "bad-signature"),
    ("UPDATE audit_head_signatures SET signed_at = 0", None),  # not signed: a time, shown, not trusted
    ("DELETE FROM desk_keys", "unknown-key"),
    ("UPDATE audit_head_signatures SET seq = 'twelve'", "bad-signature"),
    ("UPDATE desk_keys SET public_key = '!!'", "bad-key"),
], ids=["db-identity", "count", "signed-at", "own-key-unregistered", "seq-text", "key-not-base64"])
async def test_edits_to_the_key_tables_are_named(desk: Path, edit: str, problem: str | None) -> None:
    await _fill(desk)
    _sql(desk, edit)
    result = await _verify(desk)
    assert (result.ok, result.problem) == (problem is None, problem), result.message


async def test_an_attacker_key_beside_the_own_key_with_the_own_head_removed_fails(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "UPDATE audit_entries SET note = 'x' WHERE seq = 4")
    _recompute(desk)
    _sql(desk, "DELETE FROM audit_head_signatures")
    _attacker_signs(desk)
    _witness(desk).unlink()  # and the witness gone: the registered key's missing head still tells
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "unsigned")
    assert "signed head of key" in result.message and "was removed" in result.message


async def test_an_attackers_witness_is_refused(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "UPDATE audit_entries SET note = 'x' WHERE seq = 4")
    _recompute(desk)
    _sql(desk, "DELETE FROM audit_head_signatures", "DELETE FROM desk_keys")
    attacker = _attacker_signs(desk)
    (seq, h), = _sql(desk, "SELECT seq, hash FROM audit_head")
    forged = attacker.sign_head(_sql(desk, "SELECT db_id FROM audit_db")[0][0], seq, h, seq)
    w = _witness(desk)
    w.write_text(json.dumps({"version": 1, "db": db_identity(desk, ""), **forged.to_dict(),
                             "public_key": base64.b64encode(attacker.public_key).decode()}))
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "witness")
    assert "not signed by this installation's key" in result.message
    w.write_text("{not json")
    assert (await _verify(desk)).problem == "witness"
    w.unlink()
    w.mkdir()  # a folder planted at the witness's name
    assert (await _verify(desk)).problem == "witness"


async def test_an_unknown_or_late_key_is_named(desk: Path) -> None:
    await _fill(desk)
    _sql(desk, "UPDATE audit_head_signatures SET key_id = 'ed25519:0000'")
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "unknown-key")
    assert "ed25519:0000, which is not registered" in result.message
    await _fill(desk, 1, session="ses_9")  # the real key signs again (its row is back)
    _sql(desk, "DELETE FROM audit_head_signatures WHERE key_id = 'ed25519:0000'")
    _sql(desk, "UPDATE desk_keys SET first_seq = 99")
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "late-key")
    assert "registered at entry 99, after those entries" in result.message


async def test_a_swapped_public_key_is_named(desk: Path) -> None:
    await _fill(desk)
    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    _sql(desk, "UPDATE desk_keys SET public_key = ?", params=(base64.b64encode(other).decode(),))
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "bad-signature")


async def test_entries_appended_without_the_key_are_named(desk: Path) -> None:
    await _fill(desk)
    store = await SqlStore.open(desk)  # a desk that writes without signing (an old version, a script)
    await run_to_completion(store, make_record(command="rm -rf /"))
    await store.close()
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "unsigned")
    assert "entries 15..17 are covered by no signed head" in result.message


# the witness file ----------------------------------------------------------------------------------------
async def test_the_witness_never_writes_through_a_planted_link(desk: Path, tmp_path: Path) -> None:
    await _fill(desk, 1)
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    w = _witness(desk)
    w.unlink()
    w.symlink_to(target)
    await _fill(desk, 1, session="ses_2")
    assert target.read_text() == "precious\n"
    assert not w.is_symlink() and json.loads(w.read_text())["seq"] == 10


async def test_a_linked_witness_folder_is_refused_and_the_commits_stand(desk: Path, tmp_path: Path,
                                                                        caplog) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    witness_dir().parent.mkdir(parents=True)
    witness_dir().symlink_to(elsewhere)
    await _fill(desk, 2)
    assert list(elsewhere.iterdir()) == []
    assert "witness could not be written" in caplog.text
    result = await _verify(desk)
    assert (result.ok, result.problem) == (False, "witness")
    assert "unreadable" in result.message
    assert _sql(desk, "SELECT count(*) FROM audit_entries") == [(8,)]


async def test_witness_writes_are_coalesced(desk: Path) -> None:
    store = await open_store(str(desk))
    await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
    await store.save_session(SessionInfo("ses_1", "prj_1"))
    await asyncio.gather(*(run_to_completion(store, make_record(command=f"echo {i}")) for i in range(200)))
    batches = store._writer.batches
    await store.close()
    data = json.loads(_witness(desk).read_text())
    assert data["seq"] == 602  # the last head is witnessed at close (600, and the project's and session's rows)
    assert batches > 1


# signed exports -------------------------------------------------------------------------------------------
async def _export(db: Path, out: Path, session: str | None = None) -> int:
    store = await open_store(str(db))
    try:
        return await store.export(AuditQuery(session_id=session, limit=None), "jsonl", out, signed=True)
    finally:
        await store.close()


async def test_a_signed_export_is_verified_offline(desk: Path, tmp_path: Path) -> None:
    await _fill(desk, 3)
    await _fill(desk, 2, session="ses_2")
    out = tmp_path / "full.jsonl"
    assert await _export(desk, out) == 5
    key = head_signer().key_id
    result = verify_export(out, trusted_keys=[key])
    assert result.ok and result.count == 5, result.message
    assert "complete export" in result.message and key in result.message
    part = tmp_path / "part.jsonl"
    assert await _export(desk, part, session="ses_2") == 2
    result = verify_export(part)
    assert result.ok and "partial export (6 of 19 entries)" in result.message


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _rewrite(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


async def test_a_tampered_export_is_refused(desk: Path, tmp_path: Path) -> None:
    await _fill(desk, 3)
    out = tmp_path / "e.jsonl"
    await _export(desk, out)
    original = _lines(out)

    rec = json.loads(original[0])
    rec["input"] = {"command": "echo harmless"}
    _rewrite(out, [json.dumps(rec), *original[1:]])
    assert verify_export(out).problem == "altered"  # an edited record

    _rewrite(out, original[1:])
    assert verify_export(out).problem == "altered"  # a record removed

    _rewrite(out, original[:-1])
    assert verify_export(out).problem == "unsigned"  # the trailer removed

    tr = json.loads(original[-1])  # edited, and the digest recomputed without the key
    body = "".join(line + "\n" for line in [json.dumps(rec), *original[1:-1]])
    tr["records_sha256"] = hashlib.sha256(body.encode()).hexdigest()
    _rewrite(out, [json.dumps(rec), *original[1:-1], json.dumps(tr)])
    assert verify_export(out).problem == "bad-signature"

    for field, value in (("seq", 3), ("hash", "0" * 64), ("key_id", "ed25519:x")):
        tr = json.loads(original[-1])
        tr["head"][field] = value
        _rewrite(out, [*original[:-1], json.dumps(tr)])
        assert verify_export(out).problem in ("bad-signature", "bad-key"), field

    tr = json.loads(original[-1])
    tr["exported_at"] = 0.0  # backdated
    _rewrite(out, [*original[:-1], json.dumps(tr)])
    assert verify_export(out).problem == "bad-signature"

    tr = json.loads(original[-1])
    tr["head"] = {"seq": 1}
    _rewrite(out, [*original[:-1], json.dumps(tr)])
    assert verify_export(out).problem == "malformed"

    _rewrite(out, original)
    assert verify_export(out).ok


async def test_a_broken_chain_is_never_signed_in_an_export(desk: Path, tmp_path: Path) -> None:
    await _fill(desk, 2)
    _sql(desk, "UPDATE audit_entries SET note = 'x' WHERE seq = 2")
    with pytest.raises(StoreError, match="does not verify, so it is not signed"):
        await _export(desk, tmp_path / "e.jsonl")
    assert not (tmp_path / "e.jsonl").exists()


async def _fill_with_messages(db: Path) -> None:
    """Calls (one with an input large enough for a blob, one left waiting with no result) among messages."""
    await _fill(db, 2)
    store = await open_store(str(db))
    try:
        await store.append_message(StoredMessage("ses_1", "user", [{"type": "text", "text": "go on"}]))
        await run_to_completion(store, make_record(command="x" * 40_000))
        waiting = make_record(command="sleep 1")
        await store.save_transition(waiting, pending(waiting))
        await store.append_message(StoredMessage("ses_1", "assistant", [{"type": "text", "text": "done"}]))
    finally:
        await store.close()


async def test_a_signed_export_carries_the_message_entries_and_every_link_is_recomputed(desk: Path,
                                                                                       tmp_path: Path) -> None:
    await _fill_with_messages(desk)
    out = tmp_path / "e.jsonl"
    assert await _export(desk, out) == 4
    original = _lines(out)
    result = verify_export(out, trusted_keys=[head_signer().key_id])
    assert result.ok and result.count == 4, result.message
    assert "complete export: every link re-computed" in result.message
    tr = json.loads(original[-1])
    assert [e["message_id"] for e in tr["message_entries"] if e["state"] == "MESSAGE"] == [1, 2]
    assert {e["state"] for e in tr["message_entries"]} == {"MESSAGE", "ROWS"}  # the bound rows' entries too
    first = next(i for i, e in enumerate(tr["message_entries"]) if e["state"] == "MESSAGE")
    assert all(e["digests"] for line in original[:-1] for e in json.loads(line)["trail"])

    for edit in ("at", "digests", "drop"):  # the message entries are not signed: the re-computed chain binds them
        tr = json.loads(original[-1])
        if edit == "drop":
            del tr["message_entries"][first]
        else:
            tr["message_entries"][first][edit] = 1.0 if edit == "at" else tr["message_entries"][first + 1]["digests"]
        _rewrite(out, [*original[:-1], json.dumps(tr)])
        assert verify_export(out).problem == "altered", edit
    tr = json.loads(original[-1])
    tr["message_entries"][first]["record_id"] = json.loads(original[0])["id"]  # a message's entry as a call's
    _rewrite(out, [*original[:-1], json.dumps(tr)])
    assert verify_export(out).problem == "altered"
    tr["message_entries"] = None  # without them the export only claims to be partial
    _rewrite(out, [*original[:-1], json.dumps(tr)])
    result = verify_export(out)
    assert result.ok and "partial export (10 of 14 entries)" in result.message


@pytest.mark.parametrize("field, value", [
    ("input", {"command": "echo harmless"}),
    ("result", {"content": [{"type": "text", "text": "nothing"}], "details": {}, "is_error": False}),
    ("approval", {"required": True, "decision": "allow", "decided_by": "user", "decided_at": 1.0, "scope": "once",
                  "reason": ""}),
    ("provenance", [{"kind": "user", "detail": "owner", "source": "", "effect": "allow"}]),
], ids=["input", "result", "approval", "provenance"])
async def test_a_record_edited_in_a_re_signed_complete_export_is_refused(desk: Path, tmp_path: Path, field: str,
                                                                        value: object) -> None:
    """Mallory edits a call, keeps the database's signed head and re-signs the body with her own key: the
    re-computed chain holds, but the call no longer matches the digests its last entry carries."""
    await _fill_with_messages(desk)
    out = tmp_path / "e.jsonl"
    await _export(desk, out)
    original = _lines(out)
    index = next(i for i, line in enumerate(original[:-1]) if "x" * 100 in line)  # the call with a blob input
    rec = json.loads(original[index])
    assert rec[field] != value
    rec[field] = value
    lines = [*original[:index], json.dumps(rec), *original[index + 1:-1]]
    body = "".join(line + "\n" for line in lines)
    real = json.loads(original[-1])
    from desktop_app.store.integrity._signed_export import trailer

    mallory = HeadSigner(Ed25519PrivateKey.generate().private_bytes_raw())
    head = (SignedHead.from_dict(real["head"]), real["head_public_key"])
    tr = trailer(mallory, head, len(lines), hashlib.sha256(body.encode()).hexdigest(), real["message_entries"])
    _rewrite(out, [*lines, json.dumps(tr)])
    result = verify_export(out)
    assert (result.ok, result.problem) == (False, "altered"), result.message
    assert f"the {field} of record {rec['id']} differs" in result.message


async def test_an_export_re_signed_with_another_key_is_refused_by_the_trusted_key(desk: Path, tmp_path: Path) -> None:
    await _fill(desk, 2)
    out = tmp_path / "e.jsonl"
    await _export(desk, out)
    original = _lines(out)
    rec = json.loads(original[0])
    rec["trail"][-1]["note"] = "approved by the owner"
    mallory = HeadSigner(Ed25519PrivateKey.generate().private_bytes_raw())
    from desktop_app.store.integrity._signed_export import trailer

    body = "".join(line + "\n" for line in [json.dumps(rec), *original[1:-1]])
    tr = trailer(mallory, None, 2, hashlib.sha256(body.encode()).hexdigest())
    _rewrite(out, [json.dumps(rec), *original[1:-1], json.dumps(tr)])
    assert verify_export(out).ok  # self-consistent: only the key's fingerprint tells
    result = verify_export(out, trusted_keys=[head_signer().key_id])
    assert (result.ok, result.problem) == (False, "untrusted-key")


# the CLI ----------------------------------------------------------------------------------------------------
def test_the_cli_verifies_exports_and_reports_a_cut(desk: Path, tmp_path: Path, capsys) -> None:
    asyncio.run(_fill(desk, 2))
    assert cli.main(["audit", "--db", str(desk), "verify"]) == 0
    assert "audit chain OK: 8 entries verified" in capsys.readouterr().out
    out = tmp_path / "e.jsonl"
    assert cli.main(["audit", "--db", str(desk), "export", "--signed", "--out", str(out)]) == 0
    assert cli.main(["audit", "verify-export", str(out), "--key", head_signer().key_id]) == 0
    assert "export OK" in capsys.readouterr().out
    assert cli.main(["audit", "verify-export", str(out), "--key", "ed25519:other"]) == 1
    assert "untrusted-key" in capsys.readouterr().err
    _cut_tail(desk, 1)
    assert cli.main(["audit", "--db", str(desk), "verify"]) == 1
    assert "1 entries missing at the tail" in capsys.readouterr().err
    assert cli.main(["audit", "--db", str(desk), "export", "--format", "csv", "--signed"]) == 2


# the key ----------------------------------------------------------------------------------------------------
def test_the_key_file_is_private_and_never_logged(desk: Path, tmp_path: Path, capsys, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    asyncio.run(_fill(desk, 2))
    key_file = tmp_path / "data" / SIGNING_KEY_FILE
    assert key_file.stat().st_mode & 0o777 == 0o600
    seed_b64 = key_file.read_text().strip()
    seed = base64.b64decode(seed_b64)
    assert len(seed) == 32 and desk_signing_key().seed == seed
    assert "no keyring backend is available: the audit signing key is kept in" in caplog.text
    cli.main(["audit", "--db", str(desk), "verify"])
    cli.main(["audit", "--db", str(desk), "export", "--signed"])
    seen = capsys.readouterr()
    texts = [caplog.text, seen.out, seen.err, repr(desk_signing_key()), repr(head_signer())]
    assert not any(seed_b64 in t or seed.hex() in t for t in texts)
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file() and p != key_file)
    stored += b"".join(p.read_bytes() for p in tmp_path.glob("desk.db*"))
    assert seed not in stored and seed_b64.encode() not in stored and seed.hex().encode() not in stored


def test_the_key_file_refuses_a_link_and_loose_modes(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_text(base64.b64encode(os.urandom(32)).decode())
    os.chmod(elsewhere, 0o600)
    (data / SIGNING_KEY_FILE).symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="cannot be opened"):
        desk_signing_key()
    (data / SIGNING_KEY_FILE).unlink()
    (data / SIGNING_KEY_FILE).write_text(base64.b64encode(os.urandom(32)).decode())
    os.chmod(data / SIGNING_KEY_FILE, 0o644)
    with pytest.raises(ConfigError, match="readable or owned by someone else"):
        desk_signing_key()
    os.chmod(data / SIGNING_KEY_FILE, 0o600)
    (data / SIGNING_KEY_FILE).write_text("not a key")
    with pytest.raises(ConfigError, match="damaged"):
        desk_signing_key()


def _key_in_child(_: int) -> str:
    return head_signer().key_id


def test_concurrent_first_use_makes_one_key(desk: Path, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        ids = pool.map(_key_in_child, range(8))
    assert len(set(ids)) == 1
    assert [p.name for p in (tmp_path / "data").iterdir()] == [SIGNING_KEY_FILE]  # no temp file left


class _MemoryKeyring(KeyringBackend):
    """A keyring backend held in memory (the machine running the tests has none)."""

    priority = 1

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}
        self.refuse = refuse

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.refuse:
            raise PasswordSetError("locked")
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)


@pytest.mark.parametrize("refuse", [False, True], ids=["keyring", "keyring-refuses"])
def test_the_key_lives_in_the_keyring_when_there_is_one(desk: Path, tmp_path: Path, monkeypatch, refuse: bool,
                                                        caplog) -> None:
    monkeypatch.delenv("AGENT_DESK_NO_KEYRING")
    backend = _MemoryKeyring(refuse)
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        first, again = desk_signing_key(), desk_signing_key()
    finally:
        keyring.set_keyring(previous)
    assert first == again and len(first.seed) == 32
    key_file = tmp_path / "data" / SIGNING_KEY_FILE
    if refuse:
        assert (first.source, key_file.exists()) == ("file", True)
        assert "the keyring refused the signing key" in caplog.text
    else:
        assert (first.source, key_file.exists()) == ("keyring", False)
        assert base64.b64decode(backend.items[("agent-desk", "audit-signing-key")]) == first.seed
    assert first.seed.hex() not in caplog.text and "seed" not in repr(first)


async def test_two_keys_of_one_installation_share_a_database_without_false_alarms(desk: Path) -> None:
    """The window's key is in the keyring, a CLI over ssh without one uses a file key: both sign, both verify."""
    signers = [HeadSigner(os.urandom(32), witness_dir=witness_dir()) for _ in range(2)]
    for i, signer in enumerate(signers * 2):
        store = await SqlStore.open(desk, signer=signer)
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
        await store.save_session(SessionInfo("ses_1", "prj_1"))
        await run_to_completion(store, make_record(command=f"echo {i}"))
        await store.close()
    for signer in signers:
        store = await SqlStore.open(desk, signer=signer)
        result = await store.verify()
        await store.close()
        assert result.ok and result.count == 20, result.message  # 12, and each store's project and session rows
        assert all(s.key_id in result.message for s in signers)
    assert len(list(witness_dir().iterdir())) == 2


async def test_a_commit_landing_while_verify_reads_is_no_cut_tail(desk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A desk that goes on writing while `audit verify` runs: the commit and its witness land after verify's
    snapshot began. The witness is read before the snapshot, so it can never be ahead of it: no false "entries
    missing at the tail" about a log that only grew."""
    import threading

    from desktop_app.store.integrity import _verify as verifier

    await _fill(desk)
    start_walk, grew = verifier._start_walk, []

    def walk_after_a_commit(*args: object, **kwargs: object) -> object:
        if not grew:  # verify's snapshot has begun: another desk commits three entries, and its witness
            writer = threading.Thread(target=lambda: asyncio.run(_fill(desk, 1, session="ses_2")))
            writer.start()
            writer.join()
            grew.append(json.loads(_witness(desk).read_text())["seq"])
        return start_walk(*args, **kwargs)

    monkeypatch.setattr(verifier, "_start_walk", walk_after_a_commit)
    result = await _verify(desk)
    assert grew and grew[0] > 3 * RECORDS + 2, grew  # the witness moved past the head of verify's snapshot
    assert result.ok, result.message
    assert "witness at entry 14 matches" in result.message  # the snapshot's own head, witnessed before it
    assert (await _verify(desk)).ok  # and afterwards, the grown log verifies whole
