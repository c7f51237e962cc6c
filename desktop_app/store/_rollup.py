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
        # json_valid: a row a person altered by hand is counted, never refused by the charts' triggers
        by = f"(CASE WHEN json_valid({row}.approval) THEN json_extract({row}.approval, '$.decided_by') END)"
        kind = f"(CASE WHEN json_valid({row}.provenance) THEN json_extract({row}.provenance, '$[#-1].kind') END)"
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


# PostgreSQL's trigger functions run as the owner who migrated (docs/scale.md: the desks' roles insert and update
# the records, never the rollups), on the schema the migration ran in
_DEFINER = "SECURITY DEFINER SET search_path FROM CURRENT"

# what moves a record to another rollup row (its decider changes only with its state)
_CHANGED = ("state", "outcome", "risk", "name", "project_id", "created_at", "duration_ms")


def trigger_ddl(dialect: str) -> list[str]:
    """The statements that keep the rollup in step: on insert, +1 on the record's row; on an update that moves
    it, -1 on the old row and +1 on the new one."""
    if dialect == "postgresql":
        same = " AND ".join(f"OLD.{c} IS NOT DISTINCT FROM NEW.{c}" for c in _CHANGED)
        return [
            f"CREATE FUNCTION tool_call_days_apply() RETURNS trigger LANGUAGE plpgsql {_DEFINER} AS $$ BEGIN "
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


# a person's approval waits, one narrow row per call a person answered, and the model's cost per day and session ----
WAIT_COLUMNS = ("record_id", "created_at", "project_id", "session_id", "name", "state", "outcome", "risk", "wait")
_FOLLOWED = ("state", "outcome", "risk")  # what a waiting call's row follows after the answer


def _decided(row: str, dialect: str) -> tuple[str, str]:
    if dialect == "postgresql":
        return (f"({row}.approval::jsonb ->> 'decided_by')",
                f"CAST({row}.approval::jsonb ->> 'decided_at' AS DOUBLE PRECISION)")
    ok = f"json_valid({row}.approval)"
    return (f"(CASE WHEN {ok} THEN json_extract({row}.approval, '$.decided_by') END)",
            f"(CASE WHEN {ok} THEN json_extract({row}.approval, '$.decided_at') END)")


def wait_ddl(dialect: str) -> list[str]:
    """A call leaving APPROVAL_REQUIRED on a person's word gets its row (the wait: from entering that state, its
    `updated_at` then, to the answer); each later move of the call is followed."""
    by, at = _decided("NEW", dialect)
    insert = (f"INSERT INTO approval_waits ({', '.join(WAIT_COLUMNS)}) VALUES (NEW.id, NEW.created_at, "
              f"NEW.project_id, NEW.session_id, NEW.name, NEW.state, coalesce(NEW.outcome, ''), NEW.risk, "
              f"{at} - OLD.updated_at) ON CONFLICT (record_id) DO NOTHING")
    follow = (f"UPDATE approval_waits SET {', '.join(f'{c} = coalesce(NEW.{c}, {chr(39) * 2})' for c in _FOLLOWED)} "
              "WHERE record_id = NEW.id")
    cost_at = ("CAST(NEW.payload::jsonb ->> 'cost_usd' AS DOUBLE PRECISION)" if dialect == "postgresql"
               else "(CASE WHEN json_valid(NEW.payload) THEN json_extract(NEW.payload, '$.cost_usd') END)")
    cost = (f"INSERT INTO cost_days (day, project_id, session_id, cost) VALUES ({day_sql('NEW.time', dialect)}, "
            "coalesce((SELECT s.project_id FROM sessions s WHERE s.id = NEW.session_id), ''), NEW.session_id, "
            f"coalesce({cost_at}, 0)) ON CONFLICT (day, project_id, session_id) DO UPDATE SET "
            "cost = cost_days.cost + excluded.cost")
    # a wait needs both ends: an answer without its time (a hand-made row) is no wait, and no failed write
    answered = (f"OLD.state = 'APPROVAL_REQUIRED' AND NEW.state <> 'APPROVAL_REQUIRED' AND {by} IS NOT NULL "
                f"AND {at} IS NOT NULL")
    moved = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" if dialect == "postgresql" else f"OLD.{c} IS NOT NEW.{c}"
                        for c in _FOLLOWED)
    if dialect == "postgresql":
        return [
            f"CREATE FUNCTION approval_waits_apply() RETURNS trigger LANGUAGE plpgsql {_DEFINER} AS $$ BEGIN "
            f"IF {answered} THEN {insert}; ELSIF {moved} THEN {follow}; END IF; RETURN NULL; END $$",
            "CREATE TRIGGER approval_waits_apply AFTER UPDATE ON tool_calls FOR EACH ROW "
            "EXECUTE FUNCTION approval_waits_apply()",
            f"CREATE FUNCTION cost_days_apply() RETURNS trigger LANGUAGE plpgsql {_DEFINER} AS $$ BEGIN "
            f"{cost}; RETURN NULL; END $$",
            "CREATE TRIGGER cost_days_apply AFTER INSERT ON events FOR EACH ROW WHEN (NEW.type = 'token_usage') "
            "EXECUTE FUNCTION cost_days_apply()",
        ]
    return [
        f"CREATE TRIGGER approval_waits_insert AFTER UPDATE ON tool_calls WHEN {answered} BEGIN {insert}; END",
        f"CREATE TRIGGER approval_waits_follow AFTER UPDATE ON tool_calls WHEN ({moved}) AND NOT ({answered}) "
        f"BEGIN {follow}; END",
        f"CREATE TRIGGER cost_days_insert AFTER INSERT ON events WHEN NEW.type = 'token_usage' BEGIN {cost}; END",
    ]


def wait_drop_ddl(dialect: str) -> list[str]:
    if dialect == "postgresql":
        return ["DROP TRIGGER IF EXISTS approval_waits_apply ON tool_calls",
                "DROP FUNCTION IF EXISTS approval_waits_apply()", "DROP TRIGGER IF EXISTS cost_days_apply ON events",
                "DROP FUNCTION IF EXISTS cost_days_apply()"]
    return ["DROP TRIGGER IF EXISTS approval_waits_insert", "DROP TRIGGER IF EXISTS approval_waits_follow",
            "DROP TRIGGER IF EXISTS cost_days_insert"]


def wait_backfill_sql(dialect: str) -> list[str]:
    by, at = _decided("t", dialect)
    cost = ("CAST(e.payload::jsonb ->> 'cost_usd' AS DOUBLE PRECISION)" if dialect == "postgresql"
            else "json_extract(e.payload, '$.cost_usd')")
    return [
        f"INSERT INTO approval_waits ({', '.join(WAIT_COLUMNS)}) SELECT t.id, t.created_at, t.project_id, "
        f"t.session_id, t.name, t.state, coalesce(t.outcome, ''), t.risk, max({at}) - max(e.at) FROM tool_calls t "
        f"JOIN audit_entries e ON e.record_id = t.id AND e.state = 'APPROVAL_REQUIRED' WHERE {by} IS NOT NULL "
        f"AND {at} IS NOT NULL "
        "GROUP BY t.pk",
        f"INSERT INTO cost_days (day, project_id, session_id, cost) SELECT {day_sql('e.time', dialect)}, "
        f"coalesce(s.project_id, ''), e.session_id, coalesce(sum({cost}), 0) FROM events e LEFT JOIN sessions s "
        "ON s.id = e.session_id WHERE e.type = 'token_usage' GROUP BY 1, 2, 3",
    ]
