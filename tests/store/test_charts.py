"""The history's charts as SQL, on SQLite and PostgreSQL: calls per day by outcome (in the asked time zone), refusals
by reason, the risk mix, a person's approval waits with their median and p95, cost per day and per project, the
slowest tools, each following the history's filters; and the same figures from both databases."""

from __future__ import annotations

from sqlalchemy import text

from desktop_app.core import (
    Channel,
    Envelope,
    Outcome,
    ProjectInfo,
    Provenance,
    SessionInfo,
    TokenUsage,
    ToolCallState,
)
from desktop_app.store import AuditQuery, SqlStore
from desktop_app.store._charts import chart_data

from .conftest import make_record, pending

DAY = 86_400.0
T0 = 1_750_032_000.0  # 2025-06-16 00:00 UTC
DAY0 = int(T0 // DAY)


async def _call(store: SqlStore, name: str, at: float, *, prj: str = "prj_1", ses: str = "ses_1", risk: str = "low",
                end: ToolCallState = ToolCallState.COMPLETED, outcome: Outcome = Outcome.OK,
                duration_ms: float | None = 100.0, ask_s: float | None = None, person: str | None = None,
                kind: str = "") -> str:
    """A call that ran to `end`; with `ask_s` it waited that long for `person` in APPROVAL_REQUIRED first."""
    rec = make_record(name, session_id=ses, project_id=prj, created_at=at)
    rec.risk = risk
    if kind:
        rec.provenance.append(Provenance(kind, "why", decision="deny" if end is ToolCallState.DENIED else "allow"))
    await store.save_transition(rec, pending(rec))
    if ask_s is not None:
        await store.save_transition(rec, rec.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy", at=at + 1))
        rec.approval.required = True
        rec.approval.decided_by, rec.approval.decided_at = person, (at + 1 + ask_s if person else None)
        if end is not ToolCallState.DENIED:
            await store.save_transition(rec, rec.transition(ToolCallState.APPROVED, actor=person or "rule",
                                                            at=at + 1 + ask_s))
    if end is ToolCallState.DENIED:
        await store.save_transition(rec, rec.transition(end, actor=person or "policy", outcome=outcome))
        return rec.id
    await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="engine"))
    entry = rec.transition(end, actor="engine", outcome=outcome)
    rec.duration_ms = duration_ms  # as measured, not the test's own few microseconds
    await store.save_transition(rec, entry)
    return rec.id


async def _fill(store: SqlStore) -> None:
    for pid, name in (("prj_1", "alpha"), ("prj_2", "beta")):
        await store.save_project(ProjectInfo(pid, name, f"/tmp/{name}"))
    await store.save_session(SessionInfo("ses_1", "prj_1", "one"))
    await store.save_session(SessionInfo("ses_2", "prj_2", "two"))
    # day 0: three done bash (100, 200, 300 ms), a failed fs_read, a rule's denial; day 1 (late at night UTC):
    # a person's denial after 40 s, an expired approval, a person's allow after 4 s and one after 700 s
    for ms in (100.0, 200.0, 300.0):
        await _call(store, "bash", T0 + 3600, duration_ms=ms)
    await _call(store, "fs_read", T0 + 7200, end=ToolCallState.FAILED, outcome=Outcome.ERROR, duration_ms=5000.0)
    await _call(store, "bash", T0 + 7300, end=ToolCallState.DENIED, outcome=Outcome.POLICY, risk="high", kind="rule")
    day1 = T0 + DAY + 23 * 3600
    await _call(store, "fs_write", day1, prj="prj_2", ses="ses_2", end=ToolCallState.DENIED, outcome=Outcome.USER,
                risk="medium", ask_s=40.0, person="ada")
    await _call(store, "fs_write", day1 + 60, prj="prj_2", ses="ses_2", end=ToolCallState.DENIED,
                outcome=Outcome.EXPIRED, risk="medium", ask_s=900.0)
    await _call(store, "bash", day1 + 120, prj="prj_2", ses="ses_2", risk="medium", ask_s=4.0, person="ada",
                duration_ms=50.0)
    await _call(store, "bash", day1 + 300, prj="prj_2", ses="ses_2", risk="medium", ask_s=700.0, person="bob",
                duration_ms=150.0)
    for seq, (ses, at, cost) in enumerate((("ses_1", T0 + 60, 0.25), ("ses_1", T0 + DAY + 60, 0.5),
                                           ("ses_2", day1 + 10, 1.0)), start=1):
        usage = TokenUsage(session_id=ses, model="claude", input_tokens=10, output_tokens=5, cost_usd=cost)
        store.append_event(Envelope(seq, Channel.MONITOR, TokenUsage.type, at, usage.payload(), ses))
    await store.flush()


async def test_every_chart_is_aggregated_by_the_database(store: SqlStore) -> None:
    await _fill(store)
    data = await store.chart_data(AuditQuery())
    assert data.calls == 9
    per_day = {(d - DAY0, s, o): n for (d, s, o), n in data.per_day.items()}
    assert per_day == {(0, "COMPLETED", "ok"): 3, (0, "FAILED", "error"): 1, (0, "DENIED", "policy"): 1,
                       (1, "DENIED", "user"): 1, (1, "DENIED", "expired"): 1, (1, "COMPLETED", "ok"): 2}
    assert data.risks == {"low": 4, "high": 1, "medium": 4}
    assert data.refusals == {"a rule denied it": 1, "a person denied it": 1, "the approval expired": 1}
    # the waits a person answered: 4 s, 40 s, 700 s (the expired one nobody answered is not a wait)
    assert data.waits == [1, 0, 1, 0, 1]
    assert (data.wait_median_s, data.wait_p95_s) == (40.0, 700.0)
    assert {k: round(v, 6) for k, v in data.cost_per_day.items()} == {DAY0: 0.25, DAY0 + 1: 1.5}
    assert data.cost_per_project == {"prj_1": 0.75, "prj_2": 1.0}
    n, mean, top = data.tools["bash"]
    assert (n, round(mean, 3), top) == (5, 160.0, 300.0)
    assert data.tools["fs_read"] == (1, 5000.0, 5000.0)


async def test_the_charts_follow_the_filters_and_the_time_zone(store: SqlStore) -> None:
    await _fill(store)
    ses2 = await store.chart_data(AuditQuery(session_id="ses_2"))
    assert ses2.calls == 4 and set(ses2.tools) == {"bash"} and ses2.cost_per_project == {"prj_2": 1.0}
    person = await store.chart_data(AuditQuery(decider="person"))
    assert person.calls == 3 and person.refusals == {"a person denied it": 1}
    high = await store.chart_data(AuditQuery(risk="high"))
    assert high.risks == {"high": 1} and high.waits == [0] * 5 and high.wait_median_s is None
    text = await store.chart_data(AuditQuery(text="ls", tool="bash", states="COMPLETED"))
    assert text.calls == 5 and sum(text.refusals.values()) == 0
    first_day = await store.chart_data(AuditQuery(since=T0, until=T0 + DAY))
    assert first_day.calls == 5 and first_day.cost_per_day == {DAY0: 0.25}
    # two hours east of UTC, the calls of 23:00 UTC on day 1 fall on day 2
    east = await store.chart_data(AuditQuery(), tz_offset_s=2 * 3600)
    assert {d - DAY0 for d, _, _ in east.per_day} == {0, 2}
    nothing = await store.chart_data(AuditQuery(project_id="prj_none"))
    assert nothing.calls == 0 and nothing.per_day == {} and nothing.cost_per_day == {}


async def test_the_daily_rollup_gives_what_the_records_give(store: SqlStore) -> None:
    """Whole days come from the rollup the triggers keep (records moved through their states: each counted once,
    where it ended), the partial days at either end from the records: the same figures as the records alone."""
    await _fill(store)
    queries = [AuditQuery(), AuditQuery(project_id="prj_2"), AuditQuery(tool="bash", risk="medium"),
               AuditQuery(states=["DENIED", "FAILED"]), AuditQuery(outcome="user"),
               AuditQuery(since=T0 + 3000, until=T0 + DAY + 23 * 3600 + 100), AuditQuery(since=T0 + DAY),
               AuditQuery(until=T0 + 7250), AuditQuery(since=T0 + 7000, until=T0 + 7250),
               AuditQuery(session_id="ses_2", since=T0 + DAY + 3600), AuditQuery(text="ls", risk="medium")]
    for q in queries:
        fast = await store.chart_data(q)
        slow = await store._read(chart_data, q, store._dialect, 0, False)
        assert fast.to_dict() == slow.to_dict(), q
    assert (await store.chart_data(queries[5])).calls == 7
    def rolled(conn):
        return [conn.execute(text(f"SELECT {what}")).scalar() for what in (
            "sum(calls) FROM tool_call_days", "count(*) FROM approval_waits", "sum(cost) FROM cost_days",
            "state FROM approval_waits WHERE wait < 5")]

    assert await store._read(rolled) == [9, 3, 1.75, "COMPLETED"]  # the 4 s wait's call ran to its end since
