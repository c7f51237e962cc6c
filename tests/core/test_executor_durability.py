"""On a real store (a SQLite file, a PostgreSQL database): every transition is durable before its event is
published."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from desktop_app.core import EventBus, Executor, PermissionPolicy, RunContext, ToolCall, ToolRegistry
from desktop_app.store import SqlStore

from .conftest import TOOLS


async def test_state_is_in_the_database_when_its_event_arrives(store_url):
    store = await SqlStore.open(store_url)
    # Another connection, outside the store, that sees each commit as it lands.
    engine = create_engine(store_url, isolation_level="AUTOCOMMIT")
    try:
        bus = EventBus(store)
        executor = Executor(ToolRegistry(TOOLS), PermissionPolicy("auto"), bus=bus, store=store)
        seen: list[tuple[str, str, str | None]] = []
        reader = engine.connect()

        def check(env):
            row = reader.execute(text("SELECT state FROM tool_calls WHERE id = :id"),
                                 {"id": env.payload["call_id"]}).first()
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
            text("SELECT state FROM audit_entries WHERE record_id = :id ORDER BY seq"), {"id": records[1].id}
        ).fetchall()
        assert [t[0] for t in trail] == ["PENDING", "EXECUTING", "COMPLETED"]
        reader.close()
        assert (await store.verify()).ok
    finally:
        await store.close()
        engine.dispose()
