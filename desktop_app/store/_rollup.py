"""The charts' daily rollup: `tool_call_days` counts the records per UTC day, state, outcome, risk, tool, refusal
decider and project, with their durations, kept in step with `tool_calls` by triggers on the database itself
(SQLite and PostgreSQL: the writer is unchanged). A chart over a million records reads a few thousand rows."""

from __future__ import annotations

# the columns a rollup row is keyed on, in the primary key's order (the charts group by its prefix)
KEY = ("day", "state", "outcome", "risk", "name", "decider", "project_id")


def decider_sql(row: str, dialect: str) -> str:
    """Who refused a DENIED record (`row`: NEW, OLD or t): 'person', the last provenance's kind, or ''."""
    if dialect == "postgresql":
        by, kind = f"({row}.approval::jsonb ->> 'decided_by')", f"({row}.provenance::jsonb -> -1 ->> 'kind')"
    else:
        by, kind = f"json_extract({row}.approval, '$.decided_by')", f"json_extract({row}.provenance, '$[#-1].kind')"
    return (f"(CASE WHEN {row}.state = 'DENIED' THEN (CASE WHEN {by} IS NOT NULL THEN 'person' "
            f"ELSE coalesce({kind}, '') END) ELSE '' END)")


def day_sql(column: str, dialect: str, offset: str = "0") -> str:
    if dialect == "postgresql":
        return f"CAST(FLOOR(({column} + {offset}) / 86400) AS BIGINT)"
    return f"CAST(({column} + {offset}) / 86400 AS INTEGER)"


def _values(row: str, dialect: str) -> str:
    return (f"{day_sql(row + '.created_at', dialect)}, {row}.state, coalesce({row}.outcome, ''), {row}.risk, "
            f"{row}.name, {decider_sql(row, dialect)}, {row}.project_id")


def _add(row: str, dialect: str) -> str:
    top = "GREATEST(tool_call_days.dur_max, excluded.dur_max)" if dialect == "postgresql" else (
        "max(coalesce(tool_call_days.dur_max, excluded.dur_max), coalesce(excluded.dur_max, tool_call_days.dur_max))")
    timed = f"(CASE WHEN {row}.duration_ms IS NULL THEN 0 ELSE 1 END)"
    return (f"INSERT INTO tool_call_days ({', '.join(KEY)}, calls, dur_n, dur_sum, dur_max) VALUES "
            f"({_values(row, dialect)}, 1, {timed}, coalesce({row}.duration_ms, 0), {row}.duration_ms) "
            f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET calls = tool_call_days.calls + 1, "
            f"dur_n = tool_call_days.dur_n + excluded.dur_n, dur_sum = tool_call_days.dur_sum + excluded.dur_sum, "
            f"dur_max = {top}")


def _remove(dialect: str) -> str:
    keys = " AND ".join(f"{k} = {v}" for k, v in zip(KEY, _split(_values("OLD", dialect)), strict=True))
    return ("UPDATE tool_call_days SET calls = calls - 1, "
            "dur_n = dur_n - (CASE WHEN OLD.duration_ms IS NULL THEN 0 ELSE 1 END), "
            f"dur_sum = dur_sum - coalesce(OLD.duration_ms, 0) WHERE {keys}")


def _split(values: str) -> list[str]:
    """The top-level, comma-separated expressions of `values` (the commas inside brackets are theirs)."""
    out, depth, cur = [], 0, ""
    for ch in values:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()]


# what moves a record to another rollup row (its decider changes only with its state)
_CHANGED = ("state", "outcome", "risk", "name", "project_id", "created_at", "duration_ms")


def trigger_ddl(dialect: str) -> list[str]:
    """The statements that keep the rollup in step: on insert, +1 on the record's row; on an update that moves
    it, -1 on the old row and +1 on the new one."""
    if dialect == "postgresql":
        same = " AND ".join(f"OLD.{c} IS NOT DISTINCT FROM NEW.{c}" for c in _CHANGED)
        return [
            "CREATE FUNCTION tool_call_days_apply() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF TG_OP = 'UPDATE' THEN IF {same} THEN RETURN NULL; END IF; {_remove(dialect)}; END IF; "
            f"{_add('NEW', dialect)}; RETURN NULL; END $$",
            "CREATE TRIGGER tool_call_days_apply AFTER INSERT OR UPDATE ON tool_calls FOR EACH ROW "
            "EXECUTE FUNCTION tool_call_days_apply()",
        ]
    moved = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in _CHANGED)
    return [
        f"CREATE TRIGGER tool_call_days_insert AFTER INSERT ON tool_calls BEGIN {_add('NEW', dialect)}; END",
        f"CREATE TRIGGER tool_call_days_update AFTER UPDATE ON tool_calls WHEN {moved} BEGIN "
        f"{_remove(dialect)}; {_add('NEW', dialect)}; END",
    ]


def drop_ddl(dialect: str) -> list[str]:
    if dialect == "postgresql":
        return ["DROP TRIGGER IF EXISTS tool_call_days_apply ON tool_calls",
                "DROP FUNCTION IF EXISTS tool_call_days_apply()"]
    return ["DROP TRIGGER IF EXISTS tool_call_days_insert", "DROP TRIGGER IF EXISTS tool_call_days_update"]


def backfill_sql(dialect: str) -> str:
    """The rollup of the records already there (a migration, a bulk load), in one GROUP BY."""
    return (f"INSERT INTO tool_call_days ({', '.join(KEY)}, calls, dur_n, dur_sum, dur_max) "
            f"SELECT {_values('t', dialect)}, count(*), count(t.duration_ms), coalesce(sum(t.duration_ms), 0), "
            f"max(t.duration_ms) FROM tool_calls t GROUP BY {', '.join(str(i) for i in range(1, len(KEY) + 1))}")
