"""The store's Alembic migrations on both databases: from empty, from each older revision with data in it, and
no drift between the models (`_tables.py`) and what the migrations build."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, MetaData, Text, create_engine, text

from desktop_app.store import SCHEMA_VERSION, AuditQuery, SqlStore
from desktop_app.store._migrate import include_name, upgrade
from desktop_app.store._tables import STORE_TABLES, SQLModel

# A record as each older revision stored it: the raw search text PostgreSQL's parser would read a path in.
_ROW_0001 = {"pk": 1, "id": "call_old", "name": "fs_read", "input": '{"path":"/workspace/src/main.py"}',
             "session_id": "ses_1", "project_id": "prj_1", "batch_index": 0, "state": "COMPLETED",
             "outcome": "ok", "approval": "{}", "provenance": "[]", "result": None, "error": None,
             "is_error": False, "sandbox": "{}", "read_only": True, "risk": "low", "started_at": None,
             "completed_at": None, "duration_ms": None, "created_at": 5.0, "updated_at": 5.0,
             "search_text": "fs_read\n/workspace/src/main.py\nÉcole user@example.com"}


def _engine(url: str):
    return create_engine(url)


def drift(url: str, metadata: MetaData = SQLModel.metadata) -> list[Any]:
    """What autogenerate would change to make the database match `metadata` (nothing: no drift)."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={
                "include_name": lambda name, type_, parents: (
                    include_name(name, type_, parents) and (type_ != "table" or name in STORE_TABLES)),
                "compare_type": True,
            })
            return compare_metadata(ctx, metadata)
    finally:
        engine.dispose()


def _upgrade(url: str, revision: str) -> None:
    engine = _engine(url)
    with engine.connect() as conn:
        upgrade(conn, url, revision)
    engine.dispose()


async def test_from_empty_to_head_with_no_drift(store_url: str) -> None:
    await (await SqlStore.open(store_url)).close()
    assert drift(store_url) == []
    engine = _engine(store_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == SCHEMA_VERSION
    engine.dispose()


async def test_a_column_in_one_and_not_the_other_is_drift(store_url: str) -> None:
    await (await SqlStore.open(store_url)).close()
    models = MetaData()
    for table in SQLModel.metadata.sorted_tables:
        copy = table.to_metadata(models)
        if table.name == "tool_calls":
            copy.append_column(Column("only_in_models", Text(), nullable=True))
    assert [d[0] for d in drift(store_url, models)] == ["add_column"]
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE events ADD COLUMN only_in_database TEXT"))
    engine.dispose()
    assert [(d[0], d[2], d[3].name) for d in drift(store_url)] == [("remove_column", "events", "only_in_database")]


@pytest.mark.parametrize("older", ["0001", "0002", "0003"])
async def test_upgrade_from_each_older_revision_keeps_and_indexes_its_data(store_url: str, older: str) -> None:
    if store_url.startswith("sqlite"):
        from pathlib import Path

        Path(store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    _upgrade(store_url, older)
    row = dict(_ROW_0001)
    if older != "0001":
        row |= {"tool_use_id": "toolu_old", "input_blob": None}
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO tool_calls ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"),
                     row)
        conn.execute(text("INSERT INTO audit_entries (seq, record_id, state, at, actor, note, data, prev_hash, "
                          "hash) VALUES (1, 'call_old', 'COMPLETED', 5.0, 'engine', '', '{}', 'g', 'h')"))
    engine.dispose()
    store = await SqlStore.open(store_url)  # migrates to head
    try:
        for words, hits in (("main", 1), ("src/main.py", 1), ("ecole", 1), ("example", 1), ("user@example.com", 1),
                            ("nothing", 0)):
            assert await store.count(AuditQuery(text=words)) == hits, words
        got = await store.get_record("call_old")
        assert got is not None and got.input == {"path": "/workspace/src/main.py"}
        assert got.tool_use_id == ("call_old" if older == "0001" else "toolu_old")
    finally:
        await store.close()
    assert drift(store_url) == []


async def test_an_edited_call_of_an_older_desk_is_found_by_the_model_s_input(store_url: str) -> None:
    """0006: the search text of a call a person edited gains the model's input, which its trail kept."""
    if store_url.startswith("sqlite"):
        from pathlib import Path

        Path(store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    _upgrade(store_url, "0005")
    row = _ROW_0001 | {"tool_use_id": "toolu_old", "input_blob": None, "name": "bash_run",
                       "input": '{"command":"ls narwhal"}', "search_text": "bash run ls narwhal"}
    edit = {"original_input": {"command": "ls zebrafish"}, "edited_input": {"command": "ls narwhal"}}
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO tool_calls ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"),
                     row)
        for seq, data in ((1, {}), (2, edit), (3, {"provenance": {}, **edit})):
            conn.execute(text("INSERT INTO audit_entries (seq, record_id, state, at, actor, note, data, prev_hash, "
                              "hash) VALUES (:seq, 'call_old', 'APPROVAL_REQUIRED', 5.0, 'user', '', :data, 'g', 'h')"),
                         {"seq": seq, "data": json.dumps(data)})
    engine.dispose()
    store = await SqlStore.open(store_url)  # migrates to head
    try:
        for words in ("zebrafish", "narwhal", "ls zebrafish"):
            assert await store.count(AuditQuery(text=words)) == 1, words
        got = await store.get_record("call_old")
        assert got.input == {"command": "ls narwhal"} and got.model_input == {"command": "ls zebrafish"}
    finally:
        await store.close()
    assert drift(store_url) == []


async def test_entries_from_before_rfc8785_keep_their_form_and_verify(store_url: str) -> None:
    """Revision 0007 marks every entry written before it as form 1 (Python's JSON): its hash, over `5.0` and
    `1.0` as Python writes them, still checks; read as RFC 8785 (`5`, `1`) it would not."""
    from desktop_app.store.integrity._chain import CANON_LEGACY, GENESIS, WALK_COLUMNS, ChainWalk, canonical_json

    if store_url.startswith("sqlite"):
        from pathlib import Path

        Path(store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    _upgrade(store_url, "0006")
    fields = {"record_id": None, "state": "MESSAGE", "at": 5.0, "actor": "user", "note": "", "data": {"n": 1.0},
              "seq": 1, "desk": "ed25519:" + "ab" * 16}
    h = hashlib.sha256((GENESIS + canonical_json(fields)).encode()).hexdigest()
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO audit_entries (seq, record_id, state, at, actor, note, data, prev_hash, hash, "
                          "desk) VALUES (1, NULL, 'MESSAGE', 5.0, 'user', '', :data, :prev, :h, :desk)"),
                     {"data": canonical_json({"n": 1.0}), "prev": GENESIS, "h": h, "desk": fields["desk"]})
    engine.dispose()
    _upgrade(store_url, "head")
    engine = _engine(store_url)
    with engine.connect() as conn:
        columns = ", ".join("CAST(data AS TEXT)" if c == "data" else c for c in WALK_COLUMNS)  # the text as stored
        rows = [tuple(r) for r in conn.execute(text(f"SELECT {columns} FROM audit_entries"))]
    engine.dispose()
    assert rows[0][-1] == CANON_LEGACY
    walk = ChainWalk((1, h))
    walk.feed(rows)
    assert walk.finish() is None and walk.count == 1
    flipped = ChainWalk((1, h))
    flipped.feed([(*rows[0][:-1], 2)])
    assert flipped.finish().problem == "altered"
