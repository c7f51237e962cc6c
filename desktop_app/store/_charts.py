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
from ._rollup import day_sql, decider_sql

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
        return {"by": "(t.approval::jsonb ->> 'decided_by')",
                "at": "CAST(t.approval::jsonb ->> 'decided_at' AS DOUBLE PRECISION)",
                "cost": "CAST(e.payload::jsonb ->> 'cost_usd' AS DOUBLE PRECISION)"}
    return {"by": "json_extract(t.approval, '$.decided_by')", "at": "json_extract(t.approval, '$.decided_at')",
            "cost": "json_extract(e.payload, '$.cost_usd')"}


def chart_data(conn: Connection, q: AuditQuery, dialect: str, tz_offset_s: int = 0, rollup: bool = True) -> ChartData:
    """The charts of the records `q` finds (its limit, offset and page key are ignored). Whole days of a query the
    rollup can answer (no session, text, decider, MCP server or domain; days in UTC or a whole-day offset) are
    read from `tool_call_days`; the rest, and every part of any other query, from the records."""
    q = dataclasses.replace(q, limit=None, offset=0, after=None)
    out = ChartData(tz_offset_s=int(tz_offset_s))
    tools: dict[str, list[float]] = {}
    for part, whole_days in _parts(q, out.tz_offset_s) if rollup else [(q, False)]:
        rows = _from_rollup(conn, part, out.tz_offset_s) if whole_days else _from_records(conn, part, dialect,
                                                                                       out.tz_offset_s)
        for row in rows:
            _count(out, tools, *row)
    out.tools = {name: (int(k), total / k, top) for name, (k, total, top) in tools.items()}
    x = _dialect_exprs(dialect)
    _waits(conn, q, build_sql(q, dialect=dialect), x, out, rollup)
    _cost(conn, q, x, out, dialect, rollup)
    return out


def _narrow(q: AuditQuery) -> bool:
    """Filters no rollup holds: a model's id, a decider, an MCP server, a domain, words."""
    return any(v not in (None, "") for v in (q.tool_use_id, q.decider, q.mcp_server, q.domain, q.text))


def _parts(q: AuditQuery, tz: int, *, by_session: bool = False) -> list[tuple[AuditQuery, bool]]:
    """`q` split into the whole days the rollup answers (True) and the hours at either end it cannot (False)."""
    if _narrow(q) or (q.session_id is not None and not by_session) or tz % DAY_S:
        return [(q, False)]
    first = None if q.since is None else -(-int(q.since + tz) // DAY_S) * DAY_S - tz  # the first whole day's start
    last = None if q.until is None else int(q.until + tz) // DAY_S * DAY_S - tz  # the last whole day's end
    if first is not None and last is not None and first >= last:
        return [(q, False)]
    parts = [(dataclasses.replace(q, since=first, until=last), True)]
    if first is not None and first > q.since:
        parts.append((dataclasses.replace(q, until=first), False))
    if last is not None and q.until is not None and last < q.until:
        parts.append((dataclasses.replace(q, since=last), False))
    return parts


def _count(out: ChartData, tools: dict[str, list[float]], day: Any, state: str, outcome: str | None, risk: str,
           name: str, decider: str | None, n: Any, timed: Any, total_ms: Any, top_ms: Any) -> None:
    n = int(n)
    if not n:
        return
    key = (int(day), str(state), outcome or None)
    out.per_day[key] = out.per_day.get(key, 0) + n
    out.risks[str(risk)] = out.risks.get(str(risk), 0) + n
    out.calls += n
    if state == "DENIED":
        reason = refusal_reason(outcome or None, decider == "person", decider or None)
        out.refusals[reason] = out.refusals.get(reason, 0) + n
    if timed:
        t = tools.setdefault(str(name), [0, 0.0, 0.0])
        t[0] += int(timed)
        t[1] += float(total_ms or 0.0)
        t[2] = max(t[2], float(top_ms or 0.0))


_GROUPED = "GROUP BY 1, 2, 3, 4, 5, 6"


def _from_records(conn: Connection, q: AuditQuery, dialect: str, tz: int) -> Any:
    """One pass over the records: per day, state, outcome, risk, tool and refusal decider, the count and the
    durations."""
    p = build_sql(q, dialect=dialect)
    sql = (f"SELECT {day_sql('t.created_at', dialect, ':tz')}, t.state, coalesce(t.outcome, ''), t.risk, t.name, "
           f"{decider_sql('t', dialect)}, count(*), count(t.duration_ms), coalesce(sum(t.duration_ms), 0), "
           f"max(t.duration_ms) FROM {p.source}{p.where} {_GROUPED}")
    return conn.execute(text(sql), {**p.params, "tz": tz})


def _from_rollup(conn: Connection, q: AuditQuery, tz: int = 0) -> Any:
    """The whole UTC days of `q` from the rollup, read in its key's order (no sort: the GROUP BY is its prefix)."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for column, value in (("project_id", q.project_id), ("name", q.tool), ("outcome", q.outcome), ("risk", q.risk)):
        if value is not None:
            clauses.append(f"r.{column} = :{column}")
            params[column] = value
    states = q.state_values()
    if states:
        clauses.append(f"r.state IN ({', '.join(f':state{i}' for i in range(len(states)))})")
        params.update({f"state{i}": s for i, s in enumerate(states)})
    for op, name, value in ((">=", "since", q.since), ("<", "until", q.until)):
        if value is not None:
            clauses.append(f"r.day {op} :{name}")
            params[name] = int(value) // DAY_S
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    sql = (f"SELECT r.day, r.state, r.outcome, r.risk, r.name, r.decider, sum(r.calls), sum(r.dur_n), "
           f"sum(r.dur_sum), max(r.dur_max) FROM tool_call_days r{where} {_GROUPED}")
    shift = tz // DAY_S  # a whole-day time zone: added here, as an expression in SQL would make it sort
    return ((day + shift, *rest) for day, *rest in conn.execute(text(sql), params))


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


def _where(p: SqlParts, *more: str) -> str:
    clauses = [c for c in (p.where.removeprefix(" WHERE "), *more) if c]
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def _waits(conn: Connection, q: AuditQuery, p: SqlParts, x: dict[str, str], out: ChartData,
           rollup: bool = True) -> None:
    """How long a person took to answer: from the call's APPROVAL_REQUIRED entry to the approval's decided_at.
    The median and p95 are picked in order on the database (nearest rank), the histogram grouped there."""
    if rollup and p.source == "tool_calls t" and not _narrow(q):  # approval_waits holds the columns these filters read
        waits = f"SELECT t.wait AS wait FROM approval_waits t{p.where}"
    else:  # the literal state: the partial index ix_audit_entries_asked answers it (a bound value would not)
        waits = (f"SELECT {x['at']} - e.at AS wait FROM {p.source} JOIN audit_entries e ON e.record_id = t.id "
                 f"AND e.state = 'APPROVAL_REQUIRED'{_where(p, x['by'] + ' IS NOT NULL', x['at'] + ' IS NOT NULL')}")
    cases = " ".join(f"WHEN w.wait < {b} THEN {i}" for i, b in enumerate(WAIT_BUCKETS))
    sql = f"SELECT CASE {cases} ELSE {len(WAIT_BUCKETS)} END, count(*) FROM ({waits}) w GROUP BY 1"
    for bucket, n in conn.execute(text(sql), p.params):
        out.waits[int(bucket)] += int(n)
    total = sum(out.waits)
    if not total:
        return
    # both ranks in one ordered pass (nearest rank: ceil(p n), counted from 1)
    ranks = {"median": (total + 1) // 2, "p95": -(-95 * total // 100)}
    pick = (f"SELECT w.rn, w.wait FROM (SELECT v.wait, row_number() OVER (ORDER BY v.wait) AS rn FROM ({waits}) v) w "
            "WHERE w.rn IN (:median, :p95)")
    found = {int(rn): float(wait) for rn, wait in conn.execute(text(pick), {**p.params, **ranks})}
    out.wait_median_s, out.wait_p95_s = found.get(ranks["median"]), found.get(ranks["p95"])


def _cost(conn: Connection, q: AuditQuery, x: dict[str, str], out: ChartData, dialect: str,
          rollup: bool = True) -> None:
    """The model's cost (the token_usage events), per day and per project: it follows the period, project and
    session of `q` (a cost belongs to a turn, not to a tool, a state or a word). Whole days from `cost_days`."""
    scope = AuditQuery(project_id=q.project_id, session_id=q.session_id, since=q.since, until=q.until)
    for part, whole_days in _parts(scope, out.tz_offset_s, by_session=True) if rollup else [(scope, False)]:
        for day, project, cost in (_cost_days(conn, part, out.tz_offset_s) if whole_days
                                   else _cost_events(conn, part, x, out.tz_offset_s, dialect)):
            out.cost_per_day[int(day)] = out.cost_per_day.get(int(day), 0.0) + float(cost or 0.0)
            out.cost_per_project[str(project)] = out.cost_per_project.get(str(project), 0.0) + float(cost or 0.0)
    out.cost_per_day = {d: c for d, c in out.cost_per_day.items() if c}
    out.cost_per_project = {p: c for p, c in out.cost_per_project.items() if c}


def _cost_days(conn: Connection, q: AuditQuery, tz: int) -> Any:
    clauses, params = [], {}
    for clause, name, value in (("c.project_id = :project_id", "project_id", q.project_id),
                                ("c.session_id = :session_id", "session_id", q.session_id),
                                ("c.day >= :since", "since", None if q.since is None else int(q.since) // DAY_S),
                                ("c.day < :until", "until", None if q.until is None else int(q.until) // DAY_S)):
        if value is not None:
            clauses.append(clause)
            params[name] = value
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    shift = tz // DAY_S
    rows = conn.execute(text(f"SELECT c.day, c.project_id, sum(c.cost) FROM cost_days c{where} GROUP BY 1, 2"), params)
    return ((day + shift, project, cost) for day, project, cost in rows)


def _cost_events(conn: Connection, q: AuditQuery, x: dict[str, str], tz: int, dialect: str) -> Any:
    clauses, params = ["e.type = 'token_usage'"], {"tz": tz}  # literal: the partial index's
    for clause, name, value in (("s.project_id = :project_id", "project_id", q.project_id),
                                ("e.session_id = :session_id", "session_id", q.session_id),
                                ("e.time >= :since", "since", q.since), ("e.time < :until", "until", q.until)):
        if value is not None:
            clauses.append(clause)
            params[name] = value
    sql = (f"SELECT {day_sql('e.time', dialect, ':tz')}, coalesce(s.project_id, ''), sum({x['cost']}) FROM events e "
           f"LEFT JOIN sessions s ON s.id = e.session_id WHERE {' AND '.join(clauses)} GROUP BY 1, 2")
    return conn.execute(text(sql), params)
