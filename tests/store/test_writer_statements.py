"""The writer's statements on SQLite: a batch's rows of one table go in as a few multi-row statements (sizes that
are powers of two, within the engine's limit on bound variables) rather than one statement per row; and the JSON
the hot path writes comes from one C encoder built once, with the very text `json.JSONEncoder.encode` writes."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from desktop_app.store import AuditQuery, SqlStore
from desktop_app.store._writer import INSERT_ENTRY, MULTI_ROW_MAX, UPSERT_TOOL_CALL, chunk_sizes, multi_row
from desktop_app.store.integrity._chain import canonical_json, json_default, one_shot
from desktop_app.store.integrity._digests import to_json

from .conftest import make_record, run_to_completion


@pytest.mark.parametrize("count", [1, 2, 3, 30, 63, 64, 65, 200, 2000])
@pytest.mark.parametrize("most", [1, 2, 16, 64])
def test_chunks_cover_the_rows_in_powers_of_two_within_the_cap(count: int, most: int) -> None:
    sizes = chunk_sizes(count, most)
    assert sum(sizes) == count
    assert all(s <= most and s & (s - 1) == 0 for s in sizes)
    assert sizes == sorted(sizes, reverse=True)
    # largest first, so a big batch takes few statements: never more than the big chunks and one of each smaller
    assert len(sizes) <= count // most + int(math.log2(most)) + 1


def test_a_multi_row_statement_binds_each_rows_values_in_order(tmp_path: Path) -> None:
    upsert = "INSERT INTO t (a, b, c) VALUES (:a, :b, :c) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
    sql, names = multi_row(upsert, 3)
    assert names == ("a", "b", "c")
    assert sql.count("(?, ?, ?)") == 3 and sql.endswith("ON CONFLICT (a) DO UPDATE SET b = excluded.b")
    con = sqlite3.connect(tmp_path / "t.db")
    con.execute("CREATE TABLE t (a PRIMARY KEY, b, c)")
    rows = [{"a": 1, "b": "x", "c": None}, {"a": 2, "b": "y", "c": 2.5}, {"a": 1, "b": "z", "c": 0}]
    con.execute(sql, [r[n] for r in rows for n in names])
    assert con.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == [(1, "z", None), (2, "y", 2.5)]
    with pytest.raises(ValueError, match="not a one-row INSERT"):
        multi_row("UPDATE t SET b = :b", 2)


def test_the_stores_statements_fit_the_engines_limit_at_the_largest_chunk() -> None:
    limit = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    for stmt in (UPSERT_TOOL_CALL, INSERT_ENTRY):
        sql, names = multi_row(stmt.text, MULTI_ROW_MAX)
        assert sql.count("?") == MULTI_ROW_MAX * len(names) <= limit


async def _many_calls(store: SqlStore, n: int) -> list:
    """n calls run to completion at once, so the writer gets batches of many transitions each."""
    records = [make_record(command=f"echo {i}", session_id=f"ses_{i % 7}") for i in range(n)]
    await asyncio.gather(*(run_to_completion(store, r, result_text=f"done {i}") for i, r in enumerate(records)))
    return records


async def _stored(store: SqlStore) -> tuple[dict[str, tuple], int]:
    def read(conn):
        rows = {r[0]: tuple(r[1:]) for r in conn.execute(text("SELECT id, state, result, search_text FROM tool_calls"))}
        return rows, conn.execute(text("SELECT count(*) FROM audit_entries WHERE record_id IS NOT NULL")).scalar()
    return await store._read(read)


@pytest.mark.parametrize("variables", [None, 60])
async def test_a_batch_of_many_calls_is_stored_whole_and_verifies(tmp_path: Path, variables: int | None) -> None:
    """Hundreds of calls at once, on the engine's own limit and on one of 60 bound variables (two rows of
    tool_calls per statement): with a chunk past the limit the write would fail ("too many SQL variables")."""
    store = await SqlStore.open(tmp_path / "audit.db")
    try:
        if variables is not None:
            await store._run_in_writer(lambda conn: conn.connection.driver_connection.setlimit(
                sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variables))
        batches = store._writer.batches
        records = await _many_calls(store, 300)
        rows, entries = await _stored(store)
        assert store._writer.batches - batches < 3 * len(records)  # batches of several: the multi-row path ran
        assert entries == 3 * len(records)
        for i, r in enumerate(records):
            state, result, search = rows[r.id]
            assert state == "COMPLETED" and json.loads(result)["content"][0]["text"] == f"done {i}"
            assert f"done {i}" in search and f"echo {i}" in search
        hits = await store.query(AuditQuery(text="done 123", limit=10))  # the full-text index kept in step
        assert [h.id for h in hits] == [records[123].id]
        result = await store.verify()
        assert result.ok, result.message
        assert result.count == entries
    finally:
        await store.close()


# Values the hot path encodes: tool inputs and results, approvals, provenance, entry data.
_VALUES = [
    {"command": "echo 1 2"},
    {"content": [{"type": "text", "text": "é ü 日本 \u2028"}], "details": {}, "is_error": False},
    {"required": False, "decided_by": None}, [], {}, None, True, 0, -7, 2**70, 1.5, 1e-7, 1e22, float("nan"),
    float("inf"), "plain", "quote \" back \\ slash \n\t\x00\x1f", "\ud800 lone surrogate",
    {"b": 1, "a": [1, {"d": 2, "c": 3}]},
    {"set": {3, 1, 2}, "path": Path("/workspace/x")}, {1: "int key", "z": "str key"}, [[[[["deep"]]]]],
]


@pytest.mark.parametrize("value", _VALUES, ids=range(len(_VALUES)))
def test_the_built_once_encoders_write_what_json_writes(value: object) -> None:
    plain = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=json_default)
    assert to_json(value) == plain.encode(value)
    canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=json_default)
    try:
        expected = canonical.encode(value)
    except TypeError:  # keys of mixed types cannot be sorted: the same error
        with pytest.raises(TypeError):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected
    ascii_ = json.JSONEncoder(default=json_default, allow_nan=True)
    assert one_shot(ascii_)(value) == ascii_.encode(value)


def test_a_value_that_contains_itself_is_refused_as_json_refuses_it() -> None:
    loop: list = [1]
    loop.append(loop)
    nested: dict = {"a": {}}
    nested["a"]["back"] = nested
    for value in (loop, nested, {"list": loop}):
        for encode in (to_json, canonical_json):
            with pytest.raises(ValueError, match="contains itself"):
                encode(value)
    too_deep: list = []
    for _ in range(100_000):
        too_deep = [too_deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        to_json(too_deep)
    assert to_json({"after": "a refusal"}) == '{"after":"a refusal"}'  # nothing left behind by the failures


def test_a_refused_value_is_refused_as_before() -> None:
    strict = json.JSONEncoder(allow_nan=False)
    with pytest.raises(ValueError):
        one_shot(strict)(float("nan"))
    no_default = json.JSONEncoder()
    with pytest.raises(TypeError, match="not JSON serializable"):
        one_shot(no_default)(object())


def test_threads_encoding_one_value_at_once_get_its_text() -> None:
    """No table of containers is shared: with json's own (check_circular), two threads encoding one value at once
    could find each other's marks and call it circular."""
    # a Path in each: json_default runs (Python code, where the interpreter switches threads) mid-value
    shared = {"calls": [{"input": {"command": f"echo {i}", "cwd": Path(f"/w/{i}")},
                         "result": {"content": [{"text": str(i)}]}} for i in range(50)]}
    expected = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=json_default).encode(shared)
    errors: list[BaseException] = []
    texts: set[str] = set()

    def work() -> None:
        try:
            for _ in range(2000):
                texts.add(to_json(shared))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert texts == {expected}
