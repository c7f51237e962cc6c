"""Export to JSONL (records with trails) and CSV (flat columns), to a path or a stream."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from desktop_app.core import StoreError
from desktop_app.store import AuditQuery, SqlStore
from desktop_app.store._export import CSV_COLUMNS

from .conftest import make_record, run_to_completion


@pytest.fixture
async def three(store: SqlStore) -> list:
    return [await run_to_completion(store, make_record(command=f"echo {i}", created_at=10.0 * (i + 1)),
                                    result_text=f"out, \"{i}\"\nline") for i in range(3)]


async def test_jsonl_to_a_path_has_records_with_trails(store: SqlStore, three, tmp_path: Path) -> None:
    out = tmp_path / "audit.jsonl"
    assert await store.export(AuditQuery(limit=None), "jsonl", out) == 3
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [d["id"] for d in lines] == [r.id for r in reversed(three)]
    first = lines[-1]
    rec = three[0]
    shown = {"status": "done", "status_note": "", "model_input": None}  # what the window shows beside them
    assert {k: v for k, v in first.items() if k != "trail"} == {**rec.to_dict(), **shown}
    assert [(e["state"], e["seq"], e["hash"]) for e in first["trail"]] == [
        (e.state.value, e.seq, e.hash) for e in rec.trail]
    assert set(os.listdir(tmp_path)) - {"nested"} == {"audit.jsonl"}  # no temp file left (nested: SQLite's)


async def test_csv_to_a_stream_has_flat_columns(store: SqlStore, three) -> None:
    buf = io.StringIO()
    assert await store.export(AuditQuery(limit=2), "CSV", buf) == 2
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert list(rows[0].keys()) == list(CSV_COLUMNS)
    assert [r["id"] for r in rows] == [three[2].id, three[1].id]
    assert rows[0]["result_text"] == 'out, "2"\nline'
    assert json.loads(rows[0]["input"]) == {"command": "echo 2"}
    assert rows[0]["trail"].startswith("PENDING@") and "COMPLETED@" in rows[0]["trail"]
    assert rows[0]["last_entry_seq"] == str(three[2].trail[-1].seq)
    assert rows[0]["created_at_iso"] == "1970-01-01T00:00:30.000+00:00"


async def test_export_filters_and_text(store: SqlStore, three) -> None:
    buf = io.StringIO()
    assert await store.export(AuditQuery(text="echo 1", limit=None), "jsonl", buf) == 1


async def test_export_errors_are_clear(store: SqlStore, three, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown export format 'xml'"):
        await store.export(AuditQuery(), "xml", tmp_path / "x")
    with pytest.raises(StoreError, match="cannot write the export"):
        await store.export(AuditQuery(), "csv", tmp_path / "missing" / "x.csv")
