"""The record as it happened, on each database (SQLite and PostgreSQL), with the real executor: a call skipped
after a denial is its own outcome (no risk, naming the denied call) and the chain still verifies beside the
records an older desk wrote; an edited call keeps the model's input beside the person's, both searchable and
exported, and the model is told what the person changed."""

from __future__ import annotations

import asyncio
import csv
import io
import json

from desktop_app.core import (
    Allow,
    Deny,
    EventBus,
    Executor,
    HookChain,
    Outcome,
    PermissionPolicy,
    RunContext,
    ToolCallRecord,
    ToolCallState,
    ToolRegistry,
)
from desktop_app.store import AuditQuery, SqlStore
from tests.core.conftest import TOOLS, call

from .conftest import pending


class Desk:
    """The real executor on a real store; `asked()` waits for the n-th call waiting for a person."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        bus = EventBus(store)
        self.executor = Executor(ToolRegistry(TOOLS), PermissionPolicy("ask"), bus=bus, store=store,
                                 hooks=HookChain())
        self.run = RunContext(session_id="s1", project_id="p1")
        self._offered = asyncio.Event()
        bus.on("permission_required", lambda _env: self._offered.set())

    async def asked(self, n: int = 1) -> list[ToolCallRecord]:
        async with asyncio.timeout(10):
            while len(self.executor.pending()) < n:
                self._offered.clear()
                await self._offered.wait()
        return self.executor.pending()


async def legacy_skip(store: SqlStore) -> ToolCallRecord:
    """A call an older desk skipped: DENIED, outcome user, "denied by executor: skipped after a denial"."""
    rec = ToolCallRecord(name="write", input={"path": "old"}, id="call_legacy", session_id="s0", project_id="p1")
    await store.save_transition(rec, pending(rec))
    await store.save_transition(rec, rec.transition(ToolCallState.DENIED, actor="executor", outcome=Outcome.USER,
                                                    note="denied by executor: skipped after a denial"))
    return rec


async def test_a_call_skipped_after_a_denial_is_its_own_outcome_and_the_chain_verifies(store: SqlStore, tmp_path):
    await legacy_skip(store)
    desk = Desk(store)
    calls = [call("write", path="a", content="1"), call("write", path="b", content="2"), call("echo", text="x")]
    batch = asyncio.ensure_future(desk.executor.run_batch(calls, desk.run))
    [first] = await desk.asked()
    desk.executor.decide(first.id, Deny())
    denied, *skipped = await batch
    await store.flush()
    assert (denied.state, denied.outcome) == (ToolCallState.DENIED, Outcome.USER)
    for rec in skipped:
        back = await store.get_record(rec.id)
        assert (back.state, back.outcome) == (ToolCallState.DENIED, Outcome.SKIPPED)
        assert back.approval.decision is None and back.trail[-1].actor == "executor"
    listed = await store.list_records(AuditQuery(session_id="s1", outcome="skipped"))
    assert sorted(r.id for r in listed) == sorted(r.id for r in skipped)
    assert (await store.verify()).ok  # the new outcome beside an older desk's records

    out = tmp_path / "audit.jsonl"
    assert await store.export(AuditQuery(limit=None), "jsonl", out) == 4
    lines = {d["id"]: d for d in map(json.loads, out.read_text().splitlines())}
    for rec in skipped:
        line = lines[rec.id]
        assert (line["status"], line["risk"]) == ("skipped", None)
        assert line["status_note"] == "skipped after your denial of write"
    assert (lines[denied.id]["status"], lines[denied.id]["risk"]) == ("denied", "medium")
    assert lines["call_legacy"]["status"] == "denied"  # an older desk's skip reads as it was recorded
    buf = io.StringIO()
    await store.export(AuditQuery(outcome="skipped", limit=None), "csv", buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert [(r["status"], r["risk"], r["status_note"]) for r in rows] == \
        [("skipped", "", "skipped after your denial of write")] * 2


async def test_an_edited_call_keeps_both_inputs_searchable_and_the_model_is_told(store: SqlStore, tmp_path):
    desk = Desk(store)
    batch = asyncio.ensure_future(desk.executor.run_batch([call("bash_run", command="ls zebrafish")], desk.run))
    [asked] = await desk.asked()
    desk.executor.decide(asked.id, Allow(edited_input={"command": "ls narwhal"}))
    [rec] = await batch
    await store.flush()
    assert rec.state is ToolCallState.COMPLETED and desk.run.state["ran"] == ["ls narwhal"]
    told = "\n".join(b["text"] for b in rec.result["content"])
    assert told.startswith("ran ls narwhal")
    assert "the user edited your input before allowing this call" in told
    assert '- command: "ls zebrafish" -> "ls narwhal"' in told

    back = await store.get_record(rec.id)
    assert back.input == {"command": "ls narwhal"} and back.model_input == {"command": "ls zebrafish"}
    for word in ("zebrafish", "narwhal"):  # the model's version and the person's both find it
        assert [r.id for r in await store.list_records(AuditQuery(text=word))] == [rec.id]
    out = tmp_path / "audit.jsonl"
    await store.export(AuditQuery(text="zebrafish", limit=None), "jsonl", out)
    [line] = map(json.loads, out.read_text().splitlines())
    assert (line["input"], line["model_input"]) == ({"command": "ls narwhal"}, {"command": "ls zebrafish"})
    assert (await store.verify()).ok
