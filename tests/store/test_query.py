"""Audit queries: every filter, free text kept in step with writes, counts, light rows, stats, plans."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from desktop_app.core import Outcome, StoreError, ToolCallState
from desktop_app.store import AuditQuery, SqlStore
from desktop_app.store._query import build_sql

from .conftest import make_record, pending, run_to_completion


@pytest.fixture
async def filled(store: SqlStore) -> dict[str, list[str]]:
    """Nine records over three tools, two sessions, two projects, created at t = 100..900."""
    ids: dict[str, list[str]] = {"bash": [], "fs_read": [], "fs_write": []}
    specs = [
        ("bash", "ses_a", "prj_1", {"command": "grep -rn needle src/alpha"}, "found the needle"),
        ("fs_read", "ses_a", "prj_1", {"path": "/workspace/src/main.py"}, "def main(): pass"),
        ("fs_write", "ses_a", "prj_1", {"path": "/workspace/notes.md", "content": "ünïcode words"}, "wrote"),
        ("bash", "ses_b", "prj_2", {"command": "pytest -q tests"}, "3 passed"),
        ("fs_read", "ses_b", "prj_2", {"path": "/workspace/README.md"}, "haystack only"),
        ("bash", "ses_b", "prj_2", {"command": "make build"}, "error: missing target"),
        ("fs_write", "ses_a", "prj_1", {"path": "/workspace/x.py"}, "wrote"),
        ("bash", "ses_a", "prj_1", {"command": "ls"}, "needle.txt"),
        ("fs_read", "ses_b", "prj_2", {"path": "/workspace/alphabet.txt"}, "abc"),
    ]
    for i, (name, ses, prj, inp, out) in enumerate(specs):
        rec = make_record(name, session_id=ses, project_id=prj, created_at=100.0 * (i + 1), **inp)
        if i == 5:  # a failure
            await store.save_transition(rec, pending(rec))
            await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
            rec.error, rec.is_error = out, True
            await store.save_transition(rec, rec.transition(ToolCallState.FAILED, actor="engine",
                                                            outcome=Outcome.ERROR))
        elif i == 6:  # waiting for a person
            await store.save_transition(rec, pending(rec))
            await store.save_transition(rec, rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy"))
        else:
            await run_to_completion(store, rec, result_text=out)
        ids[name].append(rec.id)
    return ids


async def _ids(store: SqlStore, q: AuditQuery) -> list[str]:
    rows = await store.list_records(q)
    full = await store.query(q)
    assert [r.id for r in full] == [r.id for r in rows]
    assert await store.count(AuditQuery(**{**_fields(q), "limit": None, "offset": 0})) >= len(rows)
    return [r.id for r in rows]


def _fields(q: AuditQuery) -> dict:
    return {k: getattr(q, k) for k in AuditQuery.__dataclass_fields__}


async def test_newest_first_and_paging(store: SqlStore, filled) -> None:
    everything = await store.query(AuditQuery(limit=None))
    assert [r.created_at for r in everything] == [900.0, 800.0, 700.0, 600.0, 500.0, 400.0, 300.0, 200.0, 100.0]
    assert all(r.trail and r.trail[-1].state is r.state for r in everything)
    page2 = await store.list_records(AuditQuery(limit=3, offset=3))
    assert [r.created_at for r in page2] == [600.0, 500.0, 400.0]
    assert await store.count(AuditQuery(limit=3, offset=3)) == 9


async def test_filters(store: SqlStore, filled) -> None:
    bash = filled["bash"]
    assert await _ids(store, AuditQuery(tool="bash")) == bash[::-1]
    assert await _ids(store, AuditQuery(tool="bash", states="COMPLETED")) == [bash[3], bash[1], bash[0]]
    assert await _ids(store, AuditQuery(states=[ToolCallState.FAILED, "APPROVAL_REQUIRED"])) == [
        filled["fs_write"][1], bash[2]]
    assert await _ids(store, AuditQuery(outcome="error")) == [bash[2]]
    assert await _ids(store, AuditQuery(session_id="ses_b", tool="fs_read")) == filled["fs_read"][:0:-1]
    assert await _ids(store, AuditQuery(project_id="prj_2", since=400.0, until=600.0)) == [
        filled["fs_read"][1], bash[1]]
    assert await _ids(store, AuditQuery(tool="bash", states="COMPLETED", since=150.0, until=800.0)) == [bash[1]]
    assert await store.count(AuditQuery(project_id="prj_1")) == 5
    assert await store.count(AuditQuery(tool="nope")) == 0


async def test_free_text(store: SqlStore, filled) -> None:
    assert set(await _ids(store, AuditQuery(text="needle"))) == {filled["bash"][0], filled["bash"][3]}
    assert await _ids(store, AuditQuery(text="needle", tool="bash", since=500.0)) == [filled["bash"][3]]
    assert await _ids(store, AuditQuery(text="src/main.py")) == [filled["fs_read"][0]]  # a path, as a phrase
    assert await _ids(store, AuditQuery(text="alpha*")) == [filled["fs_read"][2], filled["bash"][0]]
    assert await _ids(store, AuditQuery(text="missing target")) == [filled["bash"][2]]  # the error text
    assert await _ids(store, AuditQuery(text="unicode")) == [filled["fs_write"][0]]  # diacritics folded
    assert await _ids(store, AuditQuery(text='"weird" AND NOT (')) == []  # query syntax is not interpreted
    assert await store.count(AuditQuery(text="needle")) == 2
    assert len(await _ids(store, AuditQuery(text="  *  "))) == 9  # no words: no text filter


async def test_text_index_follows_updates(store: SqlStore) -> None:
    rec = make_record(command="echo before")
    await store.save_transition(rec, pending(rec))
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
    assert await store.count(AuditQuery(text="before")) == 1
    rec.input = {"command": "echo after"}
    rec.result = {"content": [{"type": "text", "text": "zebra"}], "details": {}, "is_error": False}
    await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="engine"))
    assert await store.count(AuditQuery(text="before")) == 0
    assert await store.count(AuditQuery(text="after zebra")) == 1
    if store.path is not None:  # the index matches the table exactly (FTS5's own consistency check)
        await store._run_in_writer(
            lambda c: c.execute(text("INSERT INTO tool_calls_fts(tool_calls_fts) VALUES ('integrity-check')")))
    else:  # PostgreSQL's generated column follows every update of the text
        stale = "SELECT count(*) FROM tool_calls WHERE search_vector <> to_tsvector('simple', search_text)"
        assert await store._read(lambda c: c.execute(text(stale)).scalar()) == 0


async def test_images_are_not_indexed(store: SqlStore) -> None:
    rec = make_record("fs_read", path="/workspace/a.png")
    await store.save_transition(rec, pending(rec))
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
    rec.result = {"content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                           "data": "iVBORw0KGgoAAAANSUhEUg"}}]}
    await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="engine"))
    assert await store.count(AuditQuery(text="iVBORw0KGgoAAAANSUhEUg")) == 0
    assert await store.count(AuditQuery(text="a.png")) == 1


async def test_light_rows_pending_and_stats(store: SqlStore, filled) -> None:
    rows = await store.list_records(AuditQuery(tool="bash", limit=1))
    row = rows[0]
    assert (row.name, row.state, row.session_id, row.created_at) == ("bash", ToolCallState.COMPLETED, "ses_a", 800.0)
    assert row.input_preview == '{"command":"ls"}'
    pend = await store.pending_approvals()
    assert [r.id for r in pend] == [filled["fs_write"][1]]
    assert [r.id for r in await store.pending_approvals("ses_b")] == []
    stats = await store.stats()
    assert stats.records == 9 and stats.entries == 3 * 7 + 3 + 2
    assert stats.by_state == {"COMPLETED": 7, "FAILED": 1, "APPROVAL_REQUIRED": 1}
    assert stats.by_tool == {"bash": 4, "fs_read": 3, "fs_write": 2}
    assert stats.last_entry_seq == stats.entries and stats.size_bytes and stats.size_bytes > 0  # file or database


async def test_bad_queries_are_clear(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="unknown tool-call state 'DONE'"):
        await store.query(AuditQuery(states="DONE"))
    with pytest.raises(StoreError, match="limit"):
        await store.count(AuditQuery(limit=-1))


@pytest.mark.parametrize(("q", "index"), [
    (AuditQuery(tool="bash", states="COMPLETED", since=1.0, until=2.0), "ix_tool_calls_name_state_created"),
    (AuditQuery(session_id="s"), "ix_tool_calls_session_created"),
    (AuditQuery(project_id="p", since=1.0), "ix_tool_calls_project_created"),
    (AuditQuery(states="APPROVAL_REQUIRED"), "ix_tool_calls_state_created"),
    (AuditQuery(), "ix_tool_calls_created"),
    (AuditQuery(text="needle"), "VIRTUAL TABLE"),
])
async def test_queries_use_an_index_and_need_no_sort(sqlite_store: SqlStore, q: AuditQuery, index: str) -> None:
    """About SQLite itself: its query plans (test_search.py reads PostgreSQL's)."""
    store = sqlite_store
    p = build_sql(q, dialect="sqlite")
    sql = f"EXPLAIN QUERY PLAN SELECT t.id FROM {p.source}{p.where}{p.page(q)}"
    plan = " | ".join(r[3] for r in await store._read(lambda c: c.execute(text(sql), p.params).all()))
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    assert "SCAN t" not in plan or "USING" in plan, plan


async def test_who_decided_and_which_mcp_server_on_both_databases(store: SqlStore) -> None:
    """The auditor's filters: a person, the desk (a rule, the mode, a hook), or an approval that expired; the
    calls of one MCP server (its name may hold '_' and '%', LIKE's wildcards)."""
    from desktop_app.core import Approval, Provenance

    made: dict[str, list[str]] = {}
    specs = [("rule", [Provenance("mode", "ask", decision="ask"), Provenance("rule", "bash_run(ls)")], None),
             ("session-rule", [Provenance("session-rule", "bash_run")], None),
             ("mode", [Provenance("hook", "redact", decision="allow"), Provenance("mode", "auto")], None),
             ("hook", [Provenance("hook", "no-curl", decision="deny")], None),
             ("person", [Provenance("mode", "ask", decision="ask"), Provenance("user", "ada")], "ada")]
    for i, (kind, provenance, by) in enumerate(specs):
        rec = make_record("bash_run", created_at=10.0 + i)
        rec.provenance = provenance
        if by:
            rec.approval = Approval(required=True, decision="allow", decided_by=by, decided_at=1.0)
        await run_to_completion(store, rec)
        made.setdefault(kind, []).append(rec.id)
    expired = make_record("bash_run", created_at=20.0)
    await store.save_transition(expired, pending(expired))
    await store.save_transition(expired, expired.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy"))
    await store.save_transition(expired, expired.transition(ToolCallState.DENIED, actor="system",
                                                            outcome=Outcome.EXPIRED))
    for name in ("mcp__git_hub__list", "mcp__git%hub__list", "mcp__gitxhub__list", "mcp__git_hub_x__y"):
        await run_to_completion(store, make_record(name, created_at=30.0))
    assert await _ids(store, AuditQuery(decider="rule")) == made["session-rule"] + made["rule"]
    assert await _ids(store, AuditQuery(decider="mode")) == made["mode"]
    assert await _ids(store, AuditQuery(decider="hook")) == made["hook"]
    assert await _ids(store, AuditQuery(decider="person")) == made["person"]
    assert await _ids(store, AuditQuery(decider="expiry")) == [expired.id]
    assert await store.count(AuditQuery(decider="desk")) == 4 + 1 + 4  # the expired one too: nobody answered
    by_server = await store.query(AuditQuery(mcp_server="git_hub"))
    assert [r.name for r in by_server] == ["mcp__git_hub__list"]
    assert [r.name for r in await store.query(AuditQuery(mcp_server="git%hub"))] == ["mcp__git%hub__list"]
    with pytest.raises(StoreError, match="unknown decider 'robot'"):
        await store.query(AuditQuery(decider="robot"))


async def test_by_network_domain(store: SqlStore) -> None:
    """The proxy's evidence in a call's trail: found by the domain or a parent domain, on both databases."""
    from desktop_app.core import AuditEntry

    made = {}
    for name, domains in (("a", ["files.pythonhosted.org", "pypi.org"]), ("b", ["evil_%.org"]), ("c", [])):
        rec = make_record("bash_run", command=name)
        await store.save_transition(rec, pending(rec))
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))
        for d in domains:
            rec.trail.append(AuditEntry(rec.id, rec.state, 1.0, "network", f"network: {d}:443 allowed",
                                        {"network": {"domain": d, "port": 443, "verdict": "allowed"}}))
            await store.save_transition(rec, rec.trail[-1])
        made[name] = rec.id
    assert await _ids(store, AuditQuery(domain="pypi.org")) == [made["a"]]
    assert await _ids(store, AuditQuery(domain="pythonhosted.org")) == [made["a"]]
    assert await _ids(store, AuditQuery(domain="PyPI.org.")) == [made["a"]]
    assert await _ids(store, AuditQuery(domain="hosted.org")) == []  # a parent domain, not a suffix of letters
    assert await _ids(store, AuditQuery(domain="%.org")) == []  # LIKE's wildcards are only letters here
    assert await _ids(store, AuditQuery(domain="evil_%.org")) == [made["b"]]
    assert await _ids(store, AuditQuery(domain="org")) == [made["b"], made["a"]]
