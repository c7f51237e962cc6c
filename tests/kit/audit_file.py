"""An audit file to attack: a closed SQLite store with a project, a session, messages and calls, and the
attacker's own SQL connection to it (foreign keys off)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from desktop_app.core import (
    Approval,
    AuditEntry,
    Outcome,
    ProjectInfo,
    Provenance,
    SessionInfo,
    StoredMessage,
    ToolCallRecord,
    ToolCallState,
)
from desktop_app.store import SqlStore


async def record_call(store: SqlStore, command: str, *, tool_use_id: str = "toolu_1", index: int = 0,
                      approved: bool = True) -> ToolCallRecord:
    """A bash call of session ses_1 saved through its states: asked, then approved and completed (or left)."""
    rec = ToolCallRecord(name="bash", input={"command": command}, tool_use_id=tool_use_id, session_id="ses_1",
                         project_id="prj_1", batch_index=index)
    rec.trail.append(AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, "model", "tool_use received"))
    await store.save_transition(rec, rec.trail[-1])
    rec.provenance = [Provenance("rule", "Bash(echo *)", "project", "ask")]
    await store.save_transition(rec, rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy"))
    if approved:
        rec.approval = Approval(required=True, decision="allow", decided_by="user", decided_at=rec.created_at)
        await store.save_transition(rec, rec.transition(ToolCallState.APPROVED, actor="user"))
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))
        rec.result = {"content": [{"type": "text", "text": f"out of {command}"}], "details": {}, "is_error": False}
        await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="executor",
                                                        outcome=Outcome.OK))
    return rec


async def fill_audit_file(path: Path) -> dict[str, object]:
    """A closed store with a project, a session, three messages and three calls; returns their ids."""
    store = await SqlStore.open(path)
    await store.save_project(ProjectInfo(id="prj_1", name="p", path="/tmp/p", image="img", permission_mode="ask"))
    await store.save_session(SessionInfo(id="ses_1", project_id="prj_1"))
    m1 = await store.append_message(StoredMessage("ses_1", "user", [{"type": "text", "text": "list files"}]))
    uses = [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]
    m2 = await store.append_message(StoredMessage("ses_1", "assistant", uses))
    a = await record_call(store, "ls")
    b = await record_call(store, "echo hi", tool_use_id="toolu_2")
    c = await record_call(store, "rm -rf /", tool_use_id="toolu_3", approved=False)
    m3 = await store.append_message(StoredMessage("ses_1", "user", [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                                      "content": "a.txt"}]))
    result = await store.verify()
    await store.close()
    assert result.ok, result.message
    assert "3 tool calls and 3 messages match" in result.message
    return {"a": a.id, "b": b.id, "c": c.id, "messages": (m1, m2, m3)}


def raw_sql(path: Path, *statements: str, params: tuple = ()) -> list:
    """Run `statements` on the file as an attacker would (foreign keys off); the last one's rows."""
    con = sqlite3.connect(path, isolation_level=None)  # the attacker's connection: foreign keys off
    out: list = []
    for s in statements:
        out = con.execute(s, params if "?" in s else ()).fetchall()
    con.close()
    return out
