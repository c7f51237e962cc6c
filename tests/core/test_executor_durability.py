"""On a real SQLite file: every transition is durable before its event is published."""

from __future__ import annotations

import sqlite3

from desktop_app.core import EventBus, Executor, PermissionPolicy, RunContext, ToolCall, ToolRegistry
from desktop_app.store import SqlStore

from .conftest import TOOLS


async def test_state_is_in_the_database_when_its_event_arrives(tmp_path):
    db = tmp_path / "audit.db"
    store = await SqlStore.open(db)
    try:
        bus = EventBus(store)
        executor = Executor(ToolRegistry(TOOLS), PermissionPolicy("auto"), bus=bus, store=store)
        seen: list[tuple[str, str, str | None]] = []
        reader = sqlite3.connect(db)

        def check(env):
            row = reader.execute("SELECT state FROM tool_calls WHERE id = ?", (env.payload["call_id"],)).fetchone()
            seen.append((env.payload["state"], row[0] if row else None))

        bus.on("state_changed", check)
        calls = [ToolCall(f"t{i}", name, inp) for i, (name, inp) in enumerate(
            [("echo", {"text": "a"}), ("write", {"path": "p", "content": "c"}), ("boom", {}), ("nope", {})]
        )]
        records = await executor.run_batch(calls, RunContext(session_id="s"))
        assert [r.state.value for r in records] == ["COMPLETED", "COMPLETED", "FAILED", "FAILED"]
        assert len(seen) >= 8
        # the row was there (at that state or a later one) whenever an event was published
        order = ["PENDING", "APPROVAL_REQUIRED", "APPROVED", "EXECUTING", "COMPLETED", "FAILED", "DENIED", "SEALED"]
        for state, stored in seen:
            assert stored is not None
            assert order.index(stored) >= order.index(state)
        assert records[1].tool_use_id == "t1" and records[1].id != "t1"  # keyed by the desk's id
        trail = reader.execute(
            "SELECT state FROM audit_entries WHERE record_id = ? ORDER BY seq", (records[1].id,)
        ).fetchall()
        assert [t[0] for t in trail] == ["PENDING", "EXECUTING", "COMPLETED"]
        reader.close()
        assert (await store.verify()).ok
    finally:
        await store.close()
