"""`agent-desk audit list` narrows by risk and by who decided, on a real SQLite file: the same query as the
history window's filters."""

from __future__ import annotations

import asyncio
from pathlib import Path

from desktop_app.cli import main
from desktop_app.core import Approval, Risk, ToolCallRecord, ToolCallState
from desktop_app.store import SqlStore


async def _fill(db: Path) -> dict[tuple[str, str], set[str]]:
    store = await SqlStore.open(db)
    want: dict[tuple[str, str], set[str]] = {}
    try:
        for i in range(12):
            risk = (Risk.LOW, Risk.MEDIUM, Risk.HIGH)[i % 3]
            rec = ToolCallRecord(name="bash_run", input={"command": f"make t{i}"}, id=f"call_{i:04d}",
                                 session_id="ses_1", project_id="prj_1", risk=risk, created_at=1_750_000_000 + i)
            decider = "person" if i % 2 else "desk"
            if decider == "person":
                rec.approval = Approval(required=True, decision="allow", decided_by="ada", decided_at=1.0)
            await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))
            want.setdefault((risk.value, decider), set()).add(rec.id)
        await store.flush()
    finally:
        await store.close()
    return want


def test_audit_list_by_risk_and_decider(tmp_path: Path, desk_env: Path, capsys) -> None:
    db = tmp_path / "audit.db"
    want = asyncio.run(_fill(db))
    for (risk, decider), ids in want.items():
        assert main(["--db", str(db), "audit", "list", "--risk", risk, "--decider", decider]) == 0
        listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
        assert listed == ids, (risk, decider)
    assert main(["--db", str(db), "audit", "list", "--risk", "severe"]) == 2  # a clear refusal, not a traceback
    assert "invalid choice" in capsys.readouterr().err
