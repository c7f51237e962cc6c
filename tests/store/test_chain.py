"""The audit hash chain: canonical form, and verify() naming each kind of tampering done by hand in SQL, on
SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from desktop_app.core import ToolCallState
from desktop_app.store import SqlStore, canonical_json
from desktop_app.store.integrity._chain import entry_fields, split_canonical

from .conftest import make_record, run_to_completion

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(record_id=st.text(), state=st.sampled_from([s.value for s in ToolCallState]),
       at=st.floats(allow_nan=False, allow_infinity=False), actor=st.text(), note=st.text(),
       data=st.dictionaries(st.text(), json_values, max_size=4), seq=st.integers(1, 10**12))
def test_writer_canonical_form_equals_canonical_json(record_id, state, at, actor, note, data, seq) -> None:
    prefix, suffix = split_canonical(record_id, state, at, actor, note, canonical_json(data))
    assert f"{prefix}{seq}{suffix}" == canonical_json(entry_fields(record_id, state, at, actor, note, data, seq))
    assert canonical_json(entry_fields(record_id, state, at, actor, note, data, seq)) == json.dumps(
        {"record_id": record_id, "state": state, "at": at, "actor": actor, "note": note, "data": data,
         "seq": seq}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


async def _filled(store_url: str, records: int = 4) -> list[str]:
    """A store with `records` completed calls (3 entries each, seq 1..3n), closed; returns record ids."""
    store = await SqlStore.open(store_url)
    ids = [(await run_to_completion(store, make_record(command=f"echo {i}"))).id for i in range(records)]
    result = await store.verify()
    await store.close()
    assert result.ok and result.count == 3 * records
    return ids


async def _verify(store_url: str):
    store = await SqlStore.open(store_url)
    try:
        return await store.verify()
    finally:
        await store.close()


_INSERT = ("INSERT INTO audit_entries (seq, record_id, state, at, actor, note, data, prev_hash, hash) "
           "VALUES (:seq, :record_id, :state, :at, :actor, :note, :data, :prev_hash, :hash)")


def _sql(store_url: str, *statements: str, params: tuple = ()) -> list:
    """Run `statements` by hand (as an attacker with the database would), in one transaction."""
    engine = create_engine(store_url)
    out: list = []
    with engine.begin() as con:
        for s in statements:
            named = dict(zip(("seq", "record_id", "state", "at", "actor", "note", "data", "prev_hash", "hash"),
                             params, strict=False)) if ":seq" in s else {}
            result = con.execute(text(s), named)
            out = result.fetchall() if result.returns_rows else []
    engine.dispose()
    return out


def _forge(prev_hash: str, seq: int, record_id: str, state: str = "COMPLETED") -> tuple:
    """An entry an attacker who knows the algorithm would write, with a correct hash."""
    fields = {"record_id": record_id, "state": state, "at": 1.0, "actor": "attacker", "note": "", "data": {},
              "seq": seq}
    h = hashlib.sha256((prev_hash + canonical_json(fields)).encode()).hexdigest()
    return (seq, record_id, state, 1.0, "attacker", "", "{}", prev_hash, h)


async def test_intact_chain_verifies(store_url: str) -> None:
    await _filled(store_url)
    result = await _verify(store_url)
    assert result.ok and result.count == 12 and result.problem is None


async def test_altered_entry_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    _sql(store_url, "UPDATE audit_entries SET note = 'nothing to see' WHERE seq = 5")
    result = await _verify(store_url)
    assert not result.ok
    assert (result.problem, result.seq, result.record_id, result.count) == ("altered", 5, ids[1], 4)
    assert "entry 5" in result.message


async def test_altered_state_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    _sql(store_url, "UPDATE audit_entries SET state = 'DENIED' WHERE seq = 9")
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.record_id) == (False, "altered", 9, ids[2])


async def test_removed_entry_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    _sql(store_url, "DELETE FROM audit_entries WHERE seq = 7")
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.count) == (False, "removed", 7, 6)
    assert result.record_id == ids[2]  # the record of the entry after the gap
    assert "7..7" in result.message


async def test_removed_and_renumbered_entry_is_named(store_url: str) -> None:
    await _filled(store_url)
    _sql(store_url, "DELETE FROM audit_entries WHERE seq = 7",
         "UPDATE audit_entries SET seq = -seq WHERE seq > 7", "UPDATE audit_entries SET seq = -seq - 1 WHERE seq < 0",
         "UPDATE audit_head SET seq = seq - 1")
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq) == (False, "removed", 7)


async def test_removed_tail_is_named(store_url: str) -> None:
    await _filled(store_url)
    _sql(store_url, "DELETE FROM audit_entries WHERE seq >= 11")
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.count) == (False, "removed", 11, 10)


async def test_inserted_entry_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    # Make room at seq 5 and slip in a well-formed entry linked to entry 4.
    _sql(store_url, "UPDATE audit_entries SET seq = -seq WHERE seq >= 5",
         "UPDATE audit_entries SET seq = -seq + 1 WHERE seq < 0", "UPDATE audit_head SET seq = seq + 1")
    prev = _sql(store_url, "SELECT hash FROM audit_entries WHERE seq = 4")[0][0]
    _sql(store_url, _INSERT, params=_forge(prev, 5, ids[0]))
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.count, result.record_id) == (False, "inserted", 5, 4, ids[0])


async def test_inserted_entry_with_a_bad_hash_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    _sql(store_url, "UPDATE audit_entries SET seq = -seq WHERE seq >= 5",
         "UPDATE audit_entries SET seq = -seq + 1 WHERE seq < 0", "UPDATE audit_head SET seq = seq + 1")
    prev = _sql(store_url, "SELECT hash FROM audit_entries WHERE seq = 4")[0][0]
    forged = (*_forge(prev, 5, ids[3])[:-1], "0" * 64)
    _sql(store_url, _INSERT, params=forged)
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.record_id) == (False, "inserted", 5, ids[3])


async def test_appended_entry_is_named(store_url: str) -> None:
    ids = await _filled(store_url)
    prev = _sql(store_url, "SELECT hash FROM audit_entries WHERE seq = 12")[0][0]
    _sql(store_url, _INSERT, params=_forge(prev, 13, ids[0]))
    result = await _verify(store_url)
    assert (result.ok, result.problem, result.seq, result.record_id) == (False, "inserted", 13, ids[0])


async def test_chain_continues_across_reopen(store_url: str) -> None:
    await _filled(store_url, records=2)
    store = await SqlStore.open(store_url)
    rec = await run_to_completion(store, make_record())
    assert [e.seq for e in rec.trail] == [7, 8, 9]
    assert (await store.verify()).count == 9
    await store.close()
