"""The history's charts as SQL: calls per day by outcome, refusals by reason, the risk mix, the person's approval
waits (median, p95), cost per day and per project, the slowest tools. Every figure is a GROUP BY (or an ordered
pick) on the database, the same on SQLite and PostgreSQL: a million records never come into Python."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._query import AuditQuery, SqlParts, build_sql

DAY_S = 86_400
# the approval waits' histogram: upper bounds in seconds (the last bucket is open)
WAIT_BUCKETS = (5.0, 30.0, 120.0, 600.0)


@dataclass(slots=True)
class ChartData:
    """What the charts draw, aggregated. `day` keys are days since the epoch in the asked time zone."""

    per_day: dict[tuple[int, str, str | None], int] = field(default_factory=dict)  # (day, state, outcome) -> n
    risks: dict[str, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)  # reason (in words) -> n
    tools: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # name -> (timed calls, mean, max ms)
    waits: list[int] = field(default_factory=lambda: [0] * (len(WAIT_BUCKETS) + 1))
    wait_median_s: float | None = None
    wait_p95_s: float | None = None
    cost_per_day: dict[int, float] = field(default_factory=dict)
    cost_per_project: dict[str, float] = field(default_factory=dict)  # project id -> USD
    tz_offset_s: int = 0
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _dialect_exprs(dialect: str) -> dict[str, str]:
    """The few expressions the databases spell differently."""
    if dialect == "postgresql":
        return {"day": "CAST(FLOOR((t.created_at + :tz) / 86400) AS BIGINT)",
                "eday": "CAST(FLOOR((e.time + :tz) / 86400) AS BIGINT)",
                "by": "(t.approval::jsonb ->> 'decided_by')",
                "at": "CAST(t.approval::jsonb ->> 'decided_at' AS DOUBLE PRECISION)",
                "last": "(t.provenance::jsonb -> -1 ->> 'kind')",
                "cost": "CAST(e.payload::jsonb ->> 'cost_usd' AS DOUBLE PRECISION)"}
    return {"day": "CAST((t.created_at + :tz) / 86400 AS INTEGER)",
            "eday": "CAST((e.time + :tz) / 86400 AS INTEGER)",
            "by": "json_extract(t.approval, '$.decided_by')",
            "at": "json_extract(t.approval, '$.decided_at')",
            "last": "json_extract(t.provenance, '$[#-1].kind')",
            "cost": "json_extract(e.payload, '$.cost_usd')"}


def chart_data(conn: Connection, q: AuditQuery, dialect: str, tz_offset_s: int = 0) -> ChartData:
    """The charts of the records `q` finds (its limit, offset and page key are ignored)."""
    q = dataclasses.replace(q, limit=None, offset=0, after=None)
    x = _dialect_exprs(dialect)
    out = ChartData(tz_offset_s=int(tz_offset_s))
    _calls(conn, build_sql(q, dialect=dialect), x, out)
    _refusals(conn, build_sql(q, dialect=dialect), x, out)
    _waits(conn, build_sql(q, dialect=dialect), x, out)
    _cost(conn, q, x, out)
    return out


def _where(p: SqlParts, *more: str) -> str:
    clauses = [c for c in (p.where.removeprefix(" WHERE "), *more) if c]
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def _calls(conn: Connection, p: SqlParts, x: dict[str, str], out: ChartData) -> None:
    """One pass over the records: per day, state, outcome, risk and tool, the count and the durations."""
    sql = (f"SELECT {x['day']}, t.state, t.outcome, t.risk, t.name, count(*), sum(t.duration_ms), "
           f"count(t.duration_ms), max(t.duration_ms) FROM {p.source}{p.where} GROUP BY 1, 2, 3, 4, 5")
    tools: dict[str, list[float]] = {}
    for day, state, outcome, risk, name, n, total_ms, timed, top_ms in conn.execute(
            text(sql), {**p.params, "tz": out.tz_offset_s}):
        key = (int(day), str(state), outcome)
        out.per_day[key] = out.per_day.get(key, 0) + int(n)
        out.risks[str(risk)] = out.risks.get(str(risk), 0) + int(n)
        out.calls += int(n)
        if timed:
            t = tools.setdefault(str(name), [0, 0.0, 0.0])
            t[0] += int(timed)
            t[1] += float(total_ms)
            t[2] = max(t[2], float(top_ms))
    out.tools = {name: (int(k), total / k, top) for name, (k, total, top) in tools.items()}


def refusal_reason(outcome: str | None, by_person: bool, last_kind: str | None) -> str:
    """A denied call's reason, in the words the chart shows."""
    if outcome == "user" or by_person:
        return "a person denied it"
    if outcome == "expired":
        return "the approval expired"
    if outcome == "skipped":
        return "skipped after a denial"
    if outcome == "hook" or last_kind == "hook":
        return "a hook denied it"
    if last_kind in ("rule", "session-rule"):
        return "a rule denied it"
    if last_kind == "mode":
        return "the mode denied it"
    return "the policy denied it"


def _refusals(conn: Connection, p: SqlParts, x: dict[str, str], out: ChartData) -> None:
    p.params["denied"] = "DENIED"
    sql = (f"SELECT t.outcome, CASE WHEN {x['by']} IS NULL THEN 0 ELSE 1 END, {x['last']}, count(*) "
           f"FROM {p.source}{_where(p, 't.state = :denied')} GROUP BY 1, 2, 3")
    for outcome, person, kind, n in conn.execute(text(sql), p.params):
        reason = refusal_reason(outcome, bool(person), kind)
        out.refusals[reason] = out.refusals.get(reason, 0) + int(n)


def _waits(conn: Connection, p: SqlParts, x: dict[str, str], out: ChartData) -> None:
    """How long a person took to answer: from the call's APPROVAL_REQUIRED entry to the approval's decided_at.
    The median and p95 are picked in order on the database (nearest rank), the histogram grouped there."""
    p.params["asked"] = "APPROVAL_REQUIRED"
    waits = (f"SELECT {x['at']} - e.at AS wait FROM {p.source} JOIN audit_entries e ON e.record_id = t.id "
             f"AND e.state = :asked{_where(p, x['by'] + ' IS NOT NULL')}")
    cases = " ".join(f"WHEN w.wait < {b} THEN {i}" for i, b in enumerate(WAIT_BUCKETS))
    sql = f"SELECT CASE {cases} ELSE {len(WAIT_BUCKETS)} END, count(*) FROM ({waits}) w GROUP BY 1"
    for bucket, n in conn.execute(text(sql), p.params):
        out.waits[int(bucket)] += int(n)
    total = sum(out.waits)
    if not total:
        return
    pick = f"SELECT w.wait FROM ({waits}) w ORDER BY w.wait LIMIT 1 OFFSET :rank"
    out.wait_median_s = float(conn.execute(text(pick), {**p.params, "rank": (total - 1) // 2}).scalar() or 0.0)
    p95 = max(0, -(-95 * total // 100) - 1)  # the nearest rank: ceil(0.95 n), counted from 1
    out.wait_p95_s = float(conn.execute(text(pick), {**p.params, "rank": p95}).scalar() or 0.0)


def _cost(conn: Connection, q: AuditQuery, x: dict[str, str], out: ChartData) -> None:
    """The model's cost (the token_usage events), per day and per project: it follows the period, project and
    session of `q` (a cost belongs to a turn, not to a tool, a state or a word)."""
    clauses, params = ["e.type = :usage"], {"usage": "token_usage", "tz": out.tz_offset_s}
    for clause, name, value in (("s.project_id = :project_id", "project_id", q.project_id),
                                ("e.session_id = :session_id", "session_id", q.session_id),
                                ("e.time >= :since", "since", q.since), ("e.time < :until", "until", q.until)):
        if value is not None:
            clauses.append(clause)
            params[name] = value
    sql = (f"SELECT {x['eday']}, s.project_id, sum({x['cost']}) FROM events e JOIN sessions s ON s.id = e.session_id "
           f"WHERE {' AND '.join(clauses)} GROUP BY 1, 2")
    for day, project, cost in conn.execute(text(sql), params):
        out.cost_per_day[int(day)] = out.cost_per_day.get(int(day), 0.0) + float(cost or 0.0)
        out.cost_per_project[str(project)] = out.cost_per_project.get(str(project), 0.0) + float(cost or 0.0)
