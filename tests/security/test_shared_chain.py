"""A shared chain attacked, on PostgreSQL and on a SQLite file: two desks (alice and bob, each their own key)
write one chain, then someone with write access to the database re-signs, re-attributes, un-registers or forges.
`verify` must name the desk concerned; where only a desk's witness can tell, the test says so and checks it."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from desktop_app.store import AuditQuery, HeadSigner, SqlStore, canonical_json, verify_export
from desktop_app.store.integrity._chain import GENESIS, entry_fields
from desktop_app.store.integrity._signing import b64, batch_message
from tests.store.conftest import make_record, run_to_completion

# alice writes entries 1..6, bob 7..12, alice 13..18: one commit (one signed batch) per entry.
ROUNDS = (("alice", 2), ("bob", 2), ("alice", 2))


@pytest.fixture(params=["postgresql", "sqlite"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'shared.db'}"


@pytest.fixture
async def desks(shared_url: str, tmp_path: Path) -> dict[str, HeadSigner]:
    """alice's and bob's keys (each with its own witness folder), after both wrote the shared chain."""
    signers = {name: HeadSigner(os.urandom(32), witness_dir=tmp_path / f"witness-{name}", host=f"host-{name}",
                                user=name) for name in ("alice", "bob")}
    for name, records in ROUNDS:
        store = await SqlStore.open(shared_url, signer=signers[name])
        try:
            for _ in range(records):
                await run_to_completion(store, make_record(command=f"echo {name}"))
        finally:
            await store.close()
    return signers


def _sql(url: str, *statements: str, **params: object) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            out: list[tuple] = []
            for st in statements:
                res = conn.execute(text(st), params)
                out = [tuple(r) for r in res] if res.returns_rows else []
            return out
    finally:
        engine.dispose()


async def _verify(url: str, signer: HeadSigner | None = None):
    store = await SqlStore.open(url, signer=signer)
    try:
        return await store.verify()
    finally:
        await store.close()


def _recompute(url: str, from_seq: int, desk: dict[int, str] | None = None, note: dict[int, str] | None = None) -> None:
    """Rewrite entries (their desk, their note) and re-hash the chain from `from_seq` in the store's own format,
    with hashlib: what anyone with write access to the database can do without a key."""
    rows = _sql(url, "SELECT seq, record_id, state, at, actor, note, data, digests, message_id, desk, hash "
                "FROM audit_entries ORDER BY seq")
    prev = GENESIS
    for seq, rid, state, at, actor, nt, data, dg, mid, dk, h in rows:
        if seq < from_seq:
            prev = h
            continue
        dk, nt = (desk or {}).get(seq, dk), (note or {}).get(seq, nt)
        data = json.loads(data) if isinstance(data, str) else data  # PostgreSQL's driver decodes json
        fields = entry_fields(rid, state, at, actor, nt, data, seq, dg or "", mid, dk)
        h = hashlib.sha256((prev + canonical_json(fields)).encode()).hexdigest()
        _sql(url, "UPDATE audit_entries SET prev_hash = :p, hash = :h, desk = :d, note = :n WHERE seq = :s",
             p=prev, h=h, d=dk, n=nt, s=seq)
        prev = h
    _sql(url, "UPDATE audit_head SET hash = :h WHERE id = 1", h=prev)


def _resign_batch(url: str, last: int, signer: HeadSigner, *, head: bool = False) -> None:
    """Re-sign the batch ending at `last` with `signer` over the entry now stored there (and, with `head`, make
    it `signer`'s last signed head)."""
    db_id = _sql(url, "SELECT db_id FROM audit_db")[0][0]
    first, h = _sql(url, "SELECT b.first_seq, e.hash FROM audit_batches b JOIN audit_entries e ON e.seq = "
                    "b.last_seq WHERE b.last_seq = :s", s=last)[0]
    signature = signer.sign(batch_message(db_id, first, last, h, signer.key_id))
    _sql(url, "UPDATE audit_batches SET key_id = :k, hash = :h, signature = :g WHERE last_seq = :s",
         k=signer.key_id, h=h, g=signature, s=last)
    if head:
        signed = signer.sign_head(db_id, last, h, last)
        _sql(url, f"DELETE FROM audit_head_signatures WHERE key_id = '{signer.key_id}'",
             "INSERT INTO audit_head_signatures (key_id, db_id, seq, hash, count, signature, signed_at) "
             "VALUES (:k, :d, :s, :h, :s, :g, :t)", k=signer.key_id, d=db_id, s=last, h=h, g=signed.signature,
             t=signed.signed_at)


def _name(s: HeadSigner) -> str:
    return f"{s.user}@{s.host} (key {s.key_id})"


async def test_the_shared_chain_verifies_and_names_each_desk(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    alice, bob = desks["alice"], desks["bob"]
    assert _sql(shared_url, "SELECT first_seq FROM desk_keys WHERE key_id = :k", k=bob.key_id) == [(7,)]
    for signer in (None, alice, bob):  # from a third machine, and from each desk with its witness
        result = await _verify(shared_url, signer)
        assert result.ok and result.count == 18, result.message
        assert f"alice@host-alice [{alice.key_id[:20]}…] 12" in result.message
        assert f"bob@host-bob [{bob.key_id[:20]}…] 6" in result.message


# another desk's key -------------------------------------------------------------------------------------
async def test_an_entry_re_signed_by_another_desk_is_named(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    """bob rewrites alice's entry 4, re-hashes the chain and signs the batch of entry 4 with his own key: alice's
    next signed batch no longer matches the chain."""
    alice = desks["alice"]
    _recompute(shared_url, 4, note={4: "nothing happened"})
    _resign_batch(shared_url, 4, desks["bob"])
    result = await _verify(shared_url)
    assert (result.ok, result.problem) == (False, "rewritten")
    assert any(f"entry 5 is not the one desk {_name(alice)} signed" in p for p in result.problems), result.problems
    # And the last heads of both desks (bob's too) signed the old chain.
    assert "is not the one key" in result.message and "the chain was recomputed after an edit" in result.message


async def test_alices_last_entry_re_signed_by_bob_is_named(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    """At the tail no later batch covers it: alice's own last signed head, and the entry's desk, still tell."""
    alice, bob = desks["alice"], desks["bob"]
    _recompute(shared_url, 18, note={18: "nothing happened"})
    _resign_batch(shared_url, 18, bob)
    result = await _verify(shared_url)
    assert (result.ok, result.problem) == (False, "rewritten")
    assert f"entry 18 is not the one key {alice.key_id}" in result.message
    assert any(f"entry 18 names desk {_name(alice)}, but desk {_name(bob)} signed them" in p for p in result.problems)


@pytest.mark.parametrize("merged", [False, True])
async def test_a_desk_writing_in_another_desks_name_is_named(shared_url: str, desks: dict[str, HeadSigner],
                                                            merged: bool) -> None:
    """bob's client is changed to name alice in his entries (he signs them with his own key, the only one he
    has). Merging them into alice's next batch (its first seq moved back, bob's batches deleted) breaks her
    signature, which covers where her batch starts."""
    alice, bob = desks["alice"], desks["bob"]
    for signer, name_as in ((bob, alice), (alice, alice)):
        store = await SqlStore.open(shared_url, signer=signer)
        store._writer.desk = name_as.key_id  # a modified client: its entries name another desk
        try:
            await run_to_completion(store, make_record(command="rm -rf /srv/data"))
        finally:
            await store.close()
    if merged:
        _sql(shared_url, "DELETE FROM audit_batches WHERE last_seq IN (19, 20, 21)",
             "UPDATE audit_batches SET first_seq = 19 WHERE last_seq = 22")
    result = await _verify(shared_url)
    if merged:
        assert (result.ok, result.problem, result.seq) == (False, "bad-signature", 19)
        assert f"entries 19..22 do not match the signature of desk {_name(alice)}" in result.message
    else:
        assert (result.ok, result.problem, result.seq) == (False, "misattributed", 19)
        assert f"entries 19..21 name desk {_name(alice)}, but desk {_name(bob)} signed them" in result.message


@pytest.mark.parametrize("how", ["by-hand", "rehashed", "rehashed-and-batch-moved"])
async def test_an_entrys_desk_changed_to_another_registered_desk(shared_url: str, desks: dict[str, HeadSigner],
                                                                 how: str) -> None:
    alice, bob = desks["alice"], desks["bob"]
    if how == "by-hand":
        _sql(shared_url, "UPDATE audit_entries SET desk = :k WHERE seq = 3", k=bob.key_id)
    else:
        _recompute(shared_url, 3, desk={3: bob.key_id})
    if how == "rehashed-and-batch-moved":  # without bob's key, the batch's signature stays alice's
        _sql(shared_url, "UPDATE audit_batches SET key_id = :k WHERE last_seq = 3", k=bob.key_id)
    result = await _verify(shared_url)
    assert not result.ok
    expected = {  # re-hashed, the chain no longer ends where alice's last signed head says
        "by-hand": ("altered", "entry 3 (record"),
        "rehashed": ("rewritten", f"entry 3 is not the one desk {_name(alice)} signed"),
        "rehashed-and-batch-moved": ("rewritten", f"entries 3..3 do not match the signature of desk {_name(bob)}"),
    }[how]
    assert result.problem == expected[0] and any(expected[1] in p for p in result.problems), result.problems


# registered keys ----------------------------------------------------------------------------------------
async def test_a_key_registered_after_its_entries_is_named(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    bob = desks["bob"]
    _sql(shared_url, "UPDATE desk_keys SET first_seq = 9 WHERE key_id = :k", k=bob.key_id)
    result = await _verify(shared_url)
    assert (result.ok, result.problem, result.seq) == (False, "late-key", 7)
    assert f"desk {_name(bob)} was registered at entry 9, after its entries (its first is entry 7)" in result.message


async def test_a_deleted_key_row_is_named(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    bob = desks["bob"]
    _sql(shared_url, "DELETE FROM desk_keys WHERE key_id = :k", k=bob.key_id)
    result = await _verify(shared_url)
    assert (result.ok, result.problem) == (False, "unknown-key")
    assert bob.key_id in result.message and "not registered" in result.message
    assert any(f"entries 7..7 are signed by key {bob.key_id}, which is not registered" in p for p in result.problems)


async def test_a_deleted_batch_leaves_its_entries_unsigned(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    bob = desks["bob"]
    _sql(shared_url, "DELETE FROM audit_batches WHERE last_seq = 8")
    result = await _verify(shared_url)
    assert (result.ok, result.problem, result.seq) == (False, "unsigned", 8)
    assert f"entry 8 names desk {_name(bob)}, but no signature of that desk covers them" in result.message


async def test_a_keyless_writer_in_a_signed_chain_is_named(shared_url: str, desks: dict[str, HeadSigner]) -> None:
    store = await SqlStore.open(shared_url)  # no key: its entries name no desk
    try:
        await run_to_completion(store, make_record(command="who am i"))
    finally:
        await store.close()
    store = await SqlStore.open(shared_url, signer=desks["bob"])  # and a signed desk writes after it
    try:
        await run_to_completion(store, make_record(command="after"))
    finally:
        await store.close()
    result = await _verify(shared_url)
    assert (result.ok, result.problem, result.seq) == (False, "unsigned", 19)
    assert "entries 19..21 name no desk, and no desk signed them" in result.message


@pytest.mark.parametrize("edit", [
    "UPDATE audit_batches SET first_seq = 'seven' WHERE last_seq = 7",
    "UPDATE audit_batches SET signature = '!!' WHERE last_seq = 7",
    "UPDATE audit_batches SET hash = 'x' WHERE last_seq = 7",
    "UPDATE desk_keys SET first_seq = 'one'",
], ids=["first-seq-text", "signature-not-base64", "hash-edited", "key-first-seq-text"])
async def test_malformed_batch_and_key_rows_are_named(desks: dict[str, HeadSigner], shared_url: str,
                                                      edit: str) -> None:
    try:
        _sql(shared_url, edit)
    except Exception:
        assert shared_url.startswith("postgresql")  # typed columns refuse it; SQLite stores whatever it gets
        return
    result = await _verify(shared_url)
    assert (result.ok, result.problem) == (False, "bad-signature"), result.message


# a forged key -----------------------------------------------------------------------------------------------
def _forge(url: str, seq: int, host: str, user: str) -> HeadSigner:
    """Someone without any desk's key registers a key of their own, by hand, under a desk's host and user."""
    forged = HeadSigner(os.urandom(32), host=host, user=user)
    _sql(url, "INSERT INTO desk_keys (key_id, algorithm, public_key, host, user_name, registered_at, first_seq) "
         "VALUES (:k, 'ed25519', :p, :h, :u, :t, :s)", k=forged.key_id, p=b64(forged.public_key), h=host, u=user,
         t=time.time(), s=seq)
    return forged


async def test_a_forged_key_over_a_rewritten_entry_in_the_middle(shared_url: str,
                                                                 desks: dict[str, HeadSigner]) -> None:
    """Every later batch of alice and bob signed the old chain: the forged signature over entry 5 proves
    nothing about them."""
    alice = desks["alice"]
    forged = _forge(shared_url, 5, alice.host, alice.user)
    _recompute(shared_url, 5, desk={5: forged.key_id}, note={5: "nothing happened"})
    _resign_batch(shared_url, 5, forged)
    result = await _verify(shared_url)
    assert (result.ok, result.problem) == (False, "rewritten")
    assert any(f"entry 6 is not the one desk {_name(alice)} signed" in p for p in result.problems)


async def _alice_writes_one_more(url: str, alice: HeadSigner) -> tuple:
    """alice's last signed head as a copy of the database holds it (entry 18), then her entries 19..21."""
    kept = _sql(url, "SELECT seq, hash, count, signature, signed_at FROM audit_head_signatures WHERE key_id = :k",
                k=alice.key_id)[0]
    store = await SqlStore.open(url, signer=alice)
    try:
        await run_to_completion(store, make_record(command="rm -rf build"))
    finally:
        await store.close()
    return kept


def _roll_back_head(url: str, signer: HeadSigner, kept: tuple) -> None:
    _sql(url, "UPDATE audit_head_signatures SET seq = :s, hash = :h, count = :c, signature = :g, signed_at = :t "
         "WHERE key_id = :k", s=kept[0], h=kept[1], c=kept[2], g=kept[3], t=kept[4], k=signer.key_id)


async def test_a_forged_key_over_the_last_entry_with_the_head_rolled_back(
        shared_url: str, desks: dict[str, HeadSigner]) -> None:
    """alice's head, rolled back to a real signature of hers from a copy of the database, is older than her own
    last batch: the rollback shows."""
    alice = desks["alice"]
    kept = await _alice_writes_one_more(shared_url, alice)
    forged = _forge(shared_url, 21, alice.host, alice.user)
    _recompute(shared_url, 21, desk={21: forged.key_id}, note={21: "nothing happened"})
    _resign_batch(shared_url, 21, forged, head=True)
    _roll_back_head(shared_url, alice, kept)
    result = await _verify(shared_url)
    assert (result.ok, result.problem, result.seq) == (False, "rolled-back", 18)
    assert f"the last signed head of desk {_name(alice)} is at entry 18, before its signed batch ending at " \
           "entry 20" in result.message


async def test_a_forged_key_over_the_tail_since_a_copy_is_caught_by_the_witness_only(
        shared_url: str, desks: dict[str, HeadSigner]) -> None:
    """What the database alone cannot tell. With a copy of the database from before alice's last writes (her
    signed head at entry 18), the attacker rewrites all she wrote since (19..21) under a forged key with alice's
    host and user, signs it, and puts her old head back. Every signature in the database then checks: verify
    from a third machine is OK, and names the forged key beside alice's real one under the same user@host.
    alice's witness, on her own machine, saw entry 21 as she wrote it, and refuses the rewrite."""
    alice = desks["alice"]
    kept = await _alice_writes_one_more(shared_url, alice)
    forged = _forge(shared_url, 19, alice.host, alice.user)
    _recompute(shared_url, 19, desk=dict.fromkeys((19, 20, 21), forged.key_id), note={21: "nothing happened"})
    for last in (19, 20, 21):
        _resign_batch(shared_url, last, forged, head=last == 21)
    _roll_back_head(shared_url, alice, kept)
    third = await _verify(shared_url)
    assert third.ok, third.message
    assert f"alice@host-alice [{forged.key_id[:20]}…] 3" in third.message
    assert "2 keys claim alice@host-alice" in third.message
    at_alice = await _verify(shared_url, alice)
    assert (at_alice.ok, at_alice.problem) == (False, "rewritten")  # her witness saw entry 21 as she signed it
    assert "entry 21 is not the one the witness saw" in at_alice.message


# signed export ---------------------------------------------------------------------------------------------
async def test_a_signed_export_of_the_shared_chain_checks_offline(shared_url: str, desks: dict[str, HeadSigner],
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "shared.jsonl"
    store = await SqlStore.open(shared_url, signer=desks["bob"])
    try:
        assert await store.export(AuditQuery(limit=None), "jsonl", out, signed=True) == 6
    finally:
        await store.close()
    result = verify_export(out)
    assert result.ok and "every link re-computed" in result.message, result.message
    lines = out.read_text().splitlines()
    assert {e["desk"] for line in lines[:-1] for e in json.loads(line)["trail"]} == {
        desks["alice"].key_id, desks["bob"].key_id}
    # Moving an entry to the other desk in the export breaks its link (and the exporter's signature).
    moved = lines[0].replace(desks["alice"].key_id, desks["bob"].key_id) if desks["alice"].key_id in lines[0] \
        else lines[0].replace(desks["bob"].key_id, desks["alice"].key_id)
    out.write_text("\n".join([moved, *lines[1:]]) + "\n")
    assert not verify_export(out).ok
