"""Fixtures for the audit store tests: a real SQLite file, and a real PostgreSQL database, per test."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from desktop_app.core import AuditEntry, Outcome, ToolCallRecord, ToolCallState
from desktop_app.store import SqlStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "audit.db"


@pytest.fixture
async def store(store_url: str):
    """An open store on each database (tests/conftest.py's `store_url`)."""
    s = await SqlStore.open(store_url)
    yield s
    await s.close()


@pytest.fixture
async def sqlite_store(db_path: Path):
    """For a test about SQLite itself (its pragmas, FTS5's own index, its query plans): a SQLite file only."""
    s = await SqlStore.open(db_path)
    yield s
    await s.close()


def pending(record: ToolCallRecord, actor: str = "engine") -> AuditEntry:
    """The first entry of a record: the engine saves it when the record is created."""
    entry = AuditEntry(record.id, ToolCallState.PENDING, record.created_at, actor, note="created")
    record.trail.append(entry)
    return entry


async def run_to_completion(store: SqlStore, record: ToolCallRecord, *, result_text: str = "ok") -> ToolCallRecord:
    await store.save_transition(record, pending(record))
    await store.save_transition(record, record.transition(ToolCallState.EXECUTING, actor="engine"))
    record.result = {"content": [{"type": "text", "text": result_text}], "details": {}, "is_error": False}
    await store.save_transition(
        record, record.transition(ToolCallState.COMPLETED, actor="engine", outcome=Outcome.OK)
    )
    return record


def make_record(name: str = "bash", *, session_id: str = "ses_1", project_id: str = "prj_1",
                created_at: float | None = None, **input_: object) -> ToolCallRecord:
    rec = ToolCallRecord(name=name, input=dict(input_) or {"command": "ls"}, session_id=session_id,
                         project_id=project_id)
    if created_at is not None:
        rec.created_at = rec.updated_at = created_at
    return rec


def now() -> float:
    return time.time()
